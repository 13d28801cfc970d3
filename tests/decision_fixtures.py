"""Shared pieces of the decision tests: an upstream-shaped checkout with two DeepSeek-V4-Flash MTP
settings in its evidence, and a small GSM8K-format dataset."""
from __future__ import annotations

import json
from pathlib import Path

from tests import shared_trees
from tests.conftest import missing, shared_corpus

HERE = Path(__file__).parent
OVERLAY = HERE / "fixtures" / "decision"


def upstream_checkout(dest: Path, wheel_root: Path) -> Path:
    """The 0.5.23 wheel with the upstream corpus laid over it (a git checkout, tests/shared_trees.py), plus
    our B200 overlay."""
    corpus = shared_corpus()
    if corpus is None:
        missing("no shared/corpus found next to the repository (CI provides it at ../shared)")
    shared_trees.linked_copy(shared_trees.corpus_checkout(corpus, wheel_root, older_hooks=False), dest)
    shared_trees.copy_over(OVERLAY / "test", dest / "test")
    return dest


def write_gsm8k(path: Path, n: int = 12) -> Path:
    """GSM8K's test.jsonl format: a question, and an answer whose last number is the label."""
    lines = []
    for i in range(1, n + 1):
        total = 3 * i + 4
        lines.append({"question": f"Ada has {i} red and {2 * i + 4} blue pens. How many pens does she have?",
                      "answer": f"She has {i} + {2 * i + 4} = <<{i}+{2 * i + 4}={total}>>{total} pens.\n#### {total}"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path
