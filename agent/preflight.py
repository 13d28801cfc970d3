"""Preflight: what this machine and configuration give the campaign. Never fatal by itself:
what is missing becomes a note, and steps that need it plan instead of run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent.config import Settings
from tools.base import ToolError
from tools.gpus import DetectGpusArgs, GpuInfo, detect_gpus


def _resolve_sglang(settings: Settings) -> tuple[dict | None, str]:
    try:
        from tools.source.resolve import ResolveSourceArgs, resolve_source
    except ImportError:  # the evidence engine's resolver is absent: fall back to the wheel cache
        from tools.source.resolve import ensure_wheel_source

        if settings.sglang_src:
            return {"kind": "explicit", "root": settings.sglang_src}, ""
        try:
            root = ensure_wheel_source(settings.sglang_version)
        except ToolError as err:
            return None, str(err)
        return {"kind": "wheel", "root": str(root), "version": settings.sglang_version}, ""
    try:
        info = resolve_source(ResolveSourceArgs(path=settings.sglang_src, sglang_python=settings.sglang_python,
                                                version=settings.sglang_version))
    except ToolError as err:
        return None, str(err)
    return info.model_dump(mode="json"), ""


def _gpus(settings: Settings, executor) -> tuple[list[GpuInfo], str]:
    """GPUs where the jobs run: this machine, or what a remote executor's host/partition offers
    (its ``detect_gpus()``; a host that cannot be reached ends the run with the executor's message)."""
    if executor is None or not hasattr(executor, "detect_gpus"):
        found = detect_gpus(DetectGpusArgs(only=settings.gpus, nvidia_smi=settings.nvidia_smi))
        return found.gpus, found.note
    found = executor.detect_gpus()
    gpus = found.gpus
    if settings.gpus is not None:
        missing = sorted(set(settings.gpus) - {g.index for g in gpus})
        if missing:
            return [], f"GPU index {missing} not present on {settings.executor} (found {[g.index for g in gpus]})"
        gpus = [g for g in gpus if g.index in settings.gpus]
    return gpus, found.note


def run_preflight(settings: Settings, executor=None) -> dict:
    notes: list[str] = []
    gpus, gpu_note = _gpus(settings, executor)
    remote = executor is not None and hasattr(executor, "detect_gpus")
    if not gpus:
        notes.append(f"no GPU: {gpu_note}; GPU steps will be planned, not run")
    elif gpu_note:
        notes.append(gpu_note)
    if remote:
        notes.append(f"GPU jobs run through {settings.executor}; --sglang-python, --sglang and --model-path "
                     "are paths there")
    if settings.nodes > 1:
        notes.append(f"{settings.nodes} nodes: write_scripts also writes per-node serve scripts and a Slurm "
                     "batch script under multinode/ (the benchmark runs the single-node server)")
    source, problem = _resolve_sglang(settings)
    if source is None:
        notes.append(f"SGLang source not resolved: {problem}")
    python = shutil.which(settings.sglang_python)
    if python is None and remote:
        python = settings.sglang_python  # a path on the GPU host, not checkable from here
    elif python is None:
        notes.append(f"SGLang python {settings.sglang_python!r} not found; pass --sglang-python PATH")
    model_config = None
    if settings.model_path:
        config_path = Path(settings.model_path) / "config.json"
        if config_path.exists():
            try:
                config = json.loads(config_path.read_text())
                model_config = {"path": str(config_path), "architectures": config.get("architectures")}
            except json.JSONDecodeError as err:
                notes.append(f"{config_path} is not JSON ({err.msg})")
        else:
            notes.append(f"no config.json in --model-path {settings.model_path}")
    return {
        "gpus": [g.model_dump() for g in gpus],
        "sglang_root": source["root"] if source else None,
        "sglang_source": source,
        "sglang_python": python,
        "model_config": model_config,
        "executor": settings.executor,
        "notes": notes,
    }
