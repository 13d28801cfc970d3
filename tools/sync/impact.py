"""Which changed files matter for the target model.

A path matters when it is the model's implementation, a hook or config-time override that
names its architecture, the speculative-decoding rules (they govern the MTP flags), a registered
test or fixture mentioning the model, the FP8 block-GEMM kernel or its config folder, the FP8
tuning script, the benchmark client, or a packaging file. Names are matched loosely
(``DeepSeek-V4``, ``deepseek_v4``, ``DeepseekV4ForCausalLM`` and ``dsv4`` are one family) by
comparing lower-case text with ``-`` and ``_`` removed. Both layouts are accepted: a checkout
(``python/sglang/...``, ``test/registered/...``) and package-relative paths (``sglang/...``).
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Callable, Literal

from pydantic import BaseModel, Field

from tools.sync.deps import is_packaging_file

Category = Literal["model", "hook", "override", "speculative", "registered_test", "fp8_kernel",
                   "tuning_script", "benchmark_client", "packaging"]
CATEGORY_ORDER: tuple[str, ...] = ("hook", "override", "speculative", "model", "registered_test", "fp8_kernel",
                                   "tuning_script", "benchmark_client", "packaging")

# Trailing words of a model name that name a variant, not the architecture family.
_VARIANT_WORDS = {"flash", "pro", "lite", "instruct", "chat", "base", "it", "bf16", "fp8", "fp4", "nvfp4",
                  "mxfp4", "int4", "int8", "w8a8", "awq", "gptq", "preview", "exp", "thinking", "hf", "0324",
                  "0528"}
_SIZE = re.compile(r"^(a?\d+(\.\d+)?[bmk]|\d{4})$", re.I)
_SPECULATIVE_PATHS = ("sglang/srt/arg_groups/speculative_hook.py", "sglang/srt/arg_groups/fields/spec.py")


class ImpactFile(BaseModel):
    path: str
    category: Category
    why: str = Field(description="Why this file matters for the target")
    commits: list[str] = Field(default_factory=list, description="Short hashes of new commits touching it")


def squash(text: str) -> str:
    return re.sub(r"[-_\s]", "", text.lower())


def _camel_words(word: str) -> list[str]:
    return re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", word)


def model_terms(model: str, architecture: str | None = None, model_type: str | None = None) -> list[str]:
    """Squashed name fragments that identify the model family in paths and text."""
    terms: set[str] = set()
    name = PurePosixPath(model.rstrip("/")).name
    parts = [p for p in re.split(r"[-_]", name) if p]
    while len(parts) > 1 and (parts[-1].lower() in _VARIANT_WORDS or _SIZE.match(parts[-1])):
        parts.pop()
    if parts:
        terms.add(squash("".join(parts)))
        head = _camel_words(parts[0])
        if len(head) >= 2 and len(parts) >= 2:  # DeepSeek-V4 -> dsv4, as SGLang abbreviates it
            terms.add(squash("".join(w[0] for w in head) + "".join(parts[1:])))
    if architecture:
        family = re.split(r"For[A-Z]", architecture)[0] or architecture
        terms.add(squash(family))
    if model_type:
        terms.add(squash(model_type))
    return sorted(t for t in terms if len(t) >= 4)  # shorter fragments match everything


def package_path(path: str) -> str:
    """Checkout paths (``python/sglang/...``) as package paths (``sglang/...``)."""
    return path[len("python/"):] if path.startswith("python/sglang/") else path


def _mentions(text: str | None, terms: list[str]) -> bool:
    return text is not None and any(term in squash(text) for term in terms)


def classify(path: str, terms: list[str], read: Callable[[str], str | None]) -> tuple[Category, str] | None:
    """(category, why) for a path that matters, else None. ``read`` gives the file's text."""
    q = package_path(path)
    name = PurePosixPath(q).name
    named = _mentions(q, terms)
    if is_packaging_file(path):
        return "packaging", "Python packaging file (see dependency changes)"
    if q.startswith("sglang/srt/models/") and named:
        return "model", "model implementation"
    if q in _SPECULATIVE_PATHS:
        return "speculative", "speculative-decoding rules and flags (what MTP flags are valid)"
    if q.startswith("sglang/srt/arg_groups/model_overrides/"):
        if named or _mentions(read(path), terms):
            return "override", "config-time overrides for the model's architecture"
        return None
    if q.startswith("sglang/srt/arg_groups/") and q.endswith(".py"):
        if named or _mentions(read(path), terms):
            return "hook", "argument hook that names the model's architecture"
        return None
    if q.startswith("test/registered/") or q.startswith("sglang/test/"):
        if named or _mentions(read(path), terms):
            return "registered_test", "registered test or fixture mentioning the model"
        return None
    if name == "fp8_kernel.py" and q.startswith("sglang/"):
        return "fp8_kernel", "FP8 block-GEMM kernel (loads the tuned configs)"
    if "fp8_w8a8" in name and PurePosixPath(q).parent.name == "configs":
        return "fp8_kernel", "FP8 block-GEMM kernel config"
    if name.startswith("tuning_block_wise_kernel"):
        return "tuning_script", "FP8 block-GEMM tuning script (read its argparse again)"
    if q == "sglang/bench_serving.py" or q.startswith("sglang/benchmark/"):
        return "benchmark_client", "benchmark client (bench_serving)"
    return None


def impact_files(changed: list[str], terms: list[str], read: Callable[[str], str | None],
                 commits_by_path: dict[str, list[str]] | None = None) -> list[ImpactFile]:
    found: list[ImpactFile] = []
    for path in changed:
        hit = classify(path, terms, read)
        if hit:
            found.append(ImpactFile(path=path, category=hit[0], why=hit[1],
                                    commits=(commits_by_path or {}).get(path, [])))
    found.sort(key=lambda f: (CATEGORY_ORDER.index(f.category), f.path))
    return found
