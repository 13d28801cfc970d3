"""Shared pieces of the decision tests: an upstream-shaped checkout with two DeepSeek-V4-Flash MTP
settings in its evidence, and a small GSM8K-format dataset."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
OVERLAY = HERE / "fixtures" / "decision"


def corpus_dir() -> Path | None:
    """``shared/corpus`` beside the repository (CI), else the workplace's copy."""
    for candidate in (HERE.parent.parent / "shared" / "corpus", Path("/work/shared/corpus")):
        if (candidate / "build-checkout.sh").exists():
            return candidate
    return None


def upstream_checkout(dest: Path, wheel_root: Path) -> Path:
    """The 0.5.23 wheel with the upstream corpus laid over it (a git checkout), plus our B200 overlay."""
    corpus = corpus_dir()
    if corpus is None:
        if os.environ.get("CI"):
            pytest.fail("shared/corpus is missing beside the repository")
        pytest.skip("shared/corpus is not here")
    subprocess.run(["bash", str(corpus / "build-checkout.sh"), str(dest), str(wheel_root)], check=True,
                   capture_output=True, text=True, timeout=300)
    shutil.copytree(OVERLAY / "test", dest / "test", dirs_exist_ok=True)
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
