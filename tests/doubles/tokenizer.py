"""A small WordLevel tokenizer built locally with the ``tokenizers`` package (no hub download).

Its vocabulary is ``w0``..``w999`` plus ``[UNK]``, split on whitespace: the words the SGLang server
double generates, so the bench client's re-tokenized output counts match the server's counts.
The folder it writes loads with ``transformers.AutoTokenizer.from_pretrained(folder)``.
"""
from __future__ import annotations

import json
from pathlib import Path

VOCAB_WORDS = 1000


def build_tokenizer(folder: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(VOCAB_WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1 << 20,
    }))
    return folder


if __name__ == "__main__":  # benchmarks build it as a program (benchmarks/campaign_doubles.py)
    import sys

    build_tokenizer(Path(sys.argv[1]))
