"""Preflight: what this machine and configuration give the campaign. Never fatal by itself:
what is missing becomes a note, and steps that need it plan instead of run.

The result is a ``Preflight`` (also ``preflight.json``, format in docs/trace.md); graph state holds
its JSON dump, and every reader validates it back into the model (``Preflight.of``).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.config import Settings
from tools.base import ToolError
from tools.gpus import DetectGpusArgs, GpuInfo, detect_gpus
from tools.jobs import Executor
from tools.source.resolve import ResolveSourceArgs, SourceInfo, resolve_source


class ModelConfigFile(BaseModel):
    path: str = Field(description="The model's config.json")
    architectures: list[str] | None = Field(description="Its 'architectures' list, as written")


class Preflight(BaseModel):
    # "model_config" is pydantic's own attribute name, so the field has another name in code.
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    gpus: list[GpuInfo] = Field(default_factory=list, description="GPUs where the GPU jobs run")
    sglang_root: str | None = Field(None, description="The SGLang source root (None: not resolved)")
    sglang_source: SourceInfo | None = None
    sglang_python: str | None = Field(None, description="The interpreter with SGLang (None: not found)")
    model_file: ModelConfigFile | None = Field(None, alias="model_config")
    executor: str = "local"
    notes: list[str] = Field(default_factory=list, description="What is missing, for the user and the plan")

    @classmethod
    def of(cls, state: dict) -> "Preflight":
        """The preflight in a campaign state (its JSON dump)."""
        return cls.model_validate(state["preflight"])

    @property
    def root(self) -> Path | None:
        return Path(self.sglang_root) if self.sglang_root else None

    @property
    def package_dir(self) -> Path | None:
        return Path(self.sglang_source.package_dir) if self.sglang_source else None

    @property
    def architecture(self) -> str | None:
        """The model's first architecture, when its config.json was read."""
        names = self.model_file.architectures if self.model_file else None
        return names[0] if names else None


def _resolve_sglang(settings: Settings) -> tuple[SourceInfo | None, str]:
    try:
        info = resolve_source(ResolveSourceArgs(path=settings.sglang_src, sglang_python=settings.sglang_python,
                                                version=settings.sglang_version))
    except ToolError as err:
        return None, str(err)
    return info, ""


def _gpus(settings: Settings, executor: Executor | None) -> tuple[list[GpuInfo], str]:
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


def _model_file(settings: Settings, notes: list[str]) -> ModelConfigFile | None:
    if not settings.model_path:
        return None
    config_path = Path(settings.model_path) / "config.json"
    if not config_path.exists():
        notes.append(f"no config.json in --model-path {settings.model_path}")
        return None
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as err:
        notes.append(f"{config_path} is not JSON ({err.msg})")
        return None
    return ModelConfigFile(path=str(config_path), architectures=config.get("architectures"))


def run_preflight(settings: Settings, executor: Executor | None = None) -> Preflight:
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
    model_file = _model_file(settings, notes)
    return Preflight(gpus=gpus, sglang_root=source.root if source else None, sglang_source=source,
                     sglang_python=python, model_file=model_file, executor=settings.executor, notes=notes)
