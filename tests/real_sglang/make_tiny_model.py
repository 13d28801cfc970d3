"""A tiny Llama checkpoint for the real-SGLang tier, made offline: run with the sglang venv's python.

    python make_tiny_model.py OUT_DIR TEXT_DIR

A ``LlamaForCausalLM`` from transformers' own config (hidden 64, 2 layers, random weights from a
fixed seed) and a byte-level BPE tokenizer trained with ``tokenizers`` on up to 400 ``.py``/``.md``
files under TEXT_DIR (the installed sglang package: text that is on every machine with the venv),
saved with a chat template so /v1/chat/completions answers. Nothing is downloaded. OUT_DIR must not
exist yet (tests/real_sglang/build.py gives a scratch folder and renames it when this succeeds).
"""
from __future__ import annotations

import sys
from pathlib import Path

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")
VOCAB = 2048


def _texts(root: Path) -> list[str]:
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md") and p.is_file())[:400]
    return [str(p) for p in files]


def build(out: Path, text_root: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<s>", "</s>", "<pad>"]
    bpe.train(_texts(text_root), trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=special,
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
