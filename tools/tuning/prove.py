"""Proof that installed configs were used: SGLang logs, per (N, K) it looks up,
``Using configuration from <path> for W8A8 Block FP8 kernel.`` or, when it found nothing,
``Using default W8A8 Block FP8 kernel config. ... Config file not found at <path>``.

A speedup is credited to tuning only for files that appear in the first kind of line.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool
from tools.tuning.install import load_manifest

_LOADED = re.compile(r"Using configuration from (?P<path>.+?\.json) for W8A8 Block FP8 kernel")
_DEFAULT = re.compile(r"Using default W8A8 Block FP8 kernel config\..*?Config file not found at (?P<path>.+?\.json)")


class ProofResult(BaseModel):
    loaded: list[str] = Field(description="Installed targets the server logged loading")
    not_loaded: list[str] = Field(description="Installed targets never seen in the logs")
    defaults_used: list[str] = Field(description="Config files the server looked for and did not find")
    other_loaded: list[str] = Field(description="Configs the server loaded that this run did not install")
    verdict: str = Field(description="all_loaded | partly_loaded | none_loaded | no_evidence")
    evidence: list[str] = Field(description="Log lines supporting the verdict (capped)")


def _same(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def _read_logs(log_text_or_paths: str | list) -> str:
    if isinstance(log_text_or_paths, str):
        return log_text_or_paths
    parts = []
    for item in log_text_or_paths:
        path = Path(item)
        parts.append(path.read_text(errors="replace") if path.exists() else "")
    return "\n".join(parts)


def prove_configs_loaded(manifest_path: str | Path, log_text_or_paths: str | list) -> ProofResult:
    """Compare the manifest's installed files with the config lines in the server log(s).

    ``log_text_or_paths``: the log text itself (str) or a list of log file paths (missing ones
    count as empty). Only manifests in state ``installed`` count as installed.
    """
    manifest = load_manifest(Path(manifest_path))
    targets = [e.target for e in manifest.entries] if manifest.state == "installed" else []
    text = _read_logs(log_text_or_paths)
    loaded_lines: dict[str, str] = {}
    defaults: dict[str, str] = {}
    for line in text.splitlines():
        if (m := _LOADED.search(line)) is not None:
            loaded_lines.setdefault(m["path"], line.strip())
        elif (m := _DEFAULT.search(line)) is not None:
            defaults.setdefault(m["path"], line.strip())
    loaded = [t for t in targets if any(_same(t, p) for p in loaded_lines)]
    not_loaded = [t for t in targets if t not in loaded]
    other = [p for p in loaded_lines if not any(_same(t, p) for t in targets)]
    if not targets:
        verdict = "no_evidence"
    elif not loaded_lines and not defaults:
        verdict = "no_evidence"  # the Triton path never looked a config up (e.g. DeepGEMM served)
    elif not not_loaded:
        verdict = "all_loaded"
    else:
        verdict = "partly_loaded" if loaded else "none_loaded"
    evidence = [loaded_lines[p] for p in loaded_lines if any(_same(t, p) for t in targets)][:20]
    if verdict == "no_evidence":
        evidence.append("no 'W8A8 Block FP8' config line in the logs: the Triton block-FP8 path did not run, "
                        "so installed configs cannot have had an effect" if targets else
                        f"manifest state is {manifest.state!r}: nothing is installed")
    return ProofResult(loaded=loaded, not_loaded=not_loaded, defaults_used=list(defaults), other_loaded=other,
                       verdict=verdict, evidence=evidence)


class ProveArgs(BaseModel):
    """Check server logs for proof that the kernel configs a run installed were loaded."""

    manifest_path: str = Field(description="Path of the run's tuning/manifest.json")
    log_paths: list[str] = Field(description="Server log files to search")


PROVE_CONFIGS = Tool(name="prove_kernel_configs_loaded", args=ProveArgs,
                     run=lambda a: prove_configs_loaded(a.manifest_path, a.log_paths))
