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

from tools import json_data
from tools.base import Tool
from tools.tuning.install import MANIFEST, load_manifest

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
    return compare_with_log(targets, _read_logs(log_text_or_paths), manifest.state)


def compare_with_log(targets: list[str], text: str, state: str = "installed") -> ProofResult:
    """Which of ``targets`` (installed config paths) the log ``text`` shows SGLang loading."""
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
                        f"manifest state is {state!r}: nothing is installed")
    return ProofResult(loaded=loaded, not_loaded=not_loaded, defaults_used=list(defaults), other_loaded=other,
                       verdict=verdict, evidence=evidence)


class ProveArgs(BaseModel):
    """Check server logs for proof that the kernel configs a run installed were loaded."""

    manifest_path: str = Field(description="Path of the run's tuning/manifest.json")
    log_paths: list[str] = Field(description="Server log files to search")


PROVE_CONFIGS = Tool(name="prove_kernel_configs_loaded", args=ProveArgs,
                     run=lambda a: prove_configs_loaded(a.manifest_path, a.log_paths))


# -- report section ------------------------------------------------------------------------------
BENCHMARK_OUTCOME = "steps/benchmark.json"


def _launched_at(log_path: Path) -> float | None:
    """When the server job of this log started (the job folder's launch.json), if recorded."""
    try:
        return float(json_data.read((log_path.parent / "launch.json"))["launched_at"])
    except (FileNotFoundError, KeyError, TypeError, ValueError):
        return None


def _server_logs(run_dir: Path) -> dict[str, str]:
    path = run_dir / BENCHMARK_OUTCOME
    if not path.exists():
        return {}
    logs = json_data.read(path).get("data", {}).get("server_logs") or {}
    return {str(k): str(v) for k, v in logs.items()} if isinstance(logs, dict) else {}


class ServerProof(BaseModel):
    variant: str
    log: str
    counted: bool = Field(description="False: the log cannot prove anything (missing, or server started before the install)")
    verdict: str = ""
    loaded: int = 0
    defaults_used: int = 0
    note: str = ""

    def line(self, total: int) -> str:
        if not self.counted:
            return f"{self.variant}: {self.note}"
        return (f"{self.variant}: {self.verdict.replace('_', ' ')} ({self.loaded}/{total} loaded; "
                f"{self.defaults_used} shapes on default configs) — {self.log}")


class RunProof(BaseModel):
    """Which of the configs a run installed its benchmark servers loaded, per server."""

    targets: list[str] = Field(description="Installed config files")
    loaded_by: dict[str, list[str]] = Field(description="target -> variants whose server logged loading it")
    servers: list[ServerProof]
    evidence: list[str] = Field(description="Supporting log lines, as '<variant>: <line>'")
    config_dir: str
    manifest_state: str

    @property
    def loaded(self) -> list[str]:
        return [t for t in self.targets if self.loaded_by[t]]

    @property
    def all_loaded(self) -> bool:
        """Every installed file was loaded by some server started after the install."""
        return bool(self.targets) and len(self.loaded) == len(self.targets)

    def headline(self) -> str:
        total = len(self.targets)
        if not self.servers:
            return (f"{total} kernel configs installed, but no benchmark server has started since: nothing "
                    "is proven yet. Run the benchmark (resume the run on the GPU host) to get the proof.")
        if self.all_loaded:
            return f"All {total} installed kernel configs were loaded by the benchmark servers."
        missing = ", ".join(Path(t).name for t in self.targets if not self.loaded_by[t])
        return (f"{len(self.loaded)} of {total} installed kernel configs were loaded; a speedup can be credited "
                f"only to those. Not loaded: {missing}.")


def prove_run(run_dir: Path | str) -> RunProof | None:
    """The proof for a run folder; None when the run installed nothing.

    Proof is per benchmark server (``steps/benchmark.json`` data ``server_logs``): an installed file
    counts as loaded only where SGLang logged ``Using configuration from <that path>``. A server
    started before the install cannot show it (it may have read the file we replaced), so its log
    is listed but not counted.
    """
    run_dir = Path(run_dir)
    if not (run_dir / MANIFEST).exists():
        return None
    manifest = load_manifest(run_dir / MANIFEST)
    if manifest.state not in ("installed", "uninstalled") or not manifest.entries:
        return None
    targets = [e.target for e in manifest.entries]
    proof = RunProof(targets=targets, loaded_by={t: [] for t in targets}, servers=[], evidence=[],
                     config_dir=str(manifest.config_dir), manifest_state=manifest.state)
    for variant, log in _server_logs(run_dir).items():
        log_path = Path(log)
        started = _launched_at(log_path)
        if not log_path.exists():
            proof.servers.append(ServerProof(variant=variant, log=log, counted=False,
                                             note=f"log {log} is missing, nothing proven"))
            continue
        if started is not None and started < manifest.created_at:
            proof.servers.append(ServerProof(variant=variant, log=log, counted=False, note=(
                "started before the install, so its log cannot show the installed files")))
            continue
        found = compare_with_log(targets, log_path.read_text(errors="replace"))
        for target in found.loaded:
            proof.loaded_by[target].append(variant)
        proof.servers.append(ServerProof(variant=variant, log=log, counted=True, verdict=found.verdict,
                                         loaded=len(found.loaded), defaults_used=len(found.defaults_used)))
        proof.evidence += [f"{variant}: {line}" for line in found.evidence]
    return proof
