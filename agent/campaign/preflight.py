"""Preflight: what this machine and configuration give the campaign. Never fatal by itself:
what is missing becomes a note, and steps that need it plan instead of run.

The result is a ``Preflight`` (also ``preflight.json``, format in docs/trace.md); graph state holds
its JSON dump, and every reader validates it back into the model (``Preflight.of``).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, Field

from agent.settings.model import Settings
from agent.campaign.tuning_caveats import tuning_caveats
from tools.base import ToolError
from tools.checkpoint.config import CheckpointConfig, config_path, read_config
from tools.checkpoint.facts import CheckpointFacts
from tools.checkpoint.read import checkpoint_facts
from tools.gpu_choice import GpuChoice, GpuPlan, choose_gpus
from tools.gpus import GpuInfo
from tools.jobs import Executor
from tools.checkpoint.architecture import Architecture, decide_architecture
from tools.source.resolve import ResolveSourceArgs, SourceInfo, resolve_source
from tools.tuning.in_place import InPlaceArgs, InPlaceResult, configs_in_place


class Preflight(BaseModel):
    gpus: list[GpuInfo] = Field(default_factory=list, description="GPUs where the GPU jobs run")
    sglang_root: str | None = Field(None, description="The SGLang source root (None: not resolved)")
    sglang_source: SourceInfo | None = None
    sglang_python: str | None = Field(None, description="The interpreter with SGLang (None: not found)")
    checkpoint_config: CheckpointConfig | None = Field(None, description="--model-path's config.json, read once "
                                                       "here (the checkpoint's facts and the tuning's shapes)")
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint in hand, read once here")
    architecture: Architecture | None = Field(None, description="The model's architecture, decided once here "
                                              "(config.json, else --arch, else the SGLang tree), with how")
    executor: str = "local"
    gpu_plan: GpuPlan | None = Field(None, description="The campaign's one GPU plan: tuning, scripts, servers and "
                                     "multi-node scripts take it (None: a record from before it was kept)")
    notes: list[str] = Field(default_factory=list, description="What is missing, for the user and the plan")
    tuning_caveats: list[str] = Field(default_factory=list, description="Why kernel tuning would not run or not "
                                      "change the server here, with the fix (agent/campaign/tuning_caveats.py)")
    kernel_configs: InPlaceResult | None = Field(None, description="Kernel configs our runs installed in the folder "
                                                 "the server reads, as preflight found them (None: jobs elsewhere)")

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


def _resolve_sglang(settings: Settings) -> tuple[SourceInfo | None, str]:
    try:
        info = resolve_source(ResolveSourceArgs(path=settings.sglang_src, sglang_python=settings.sglang_python,
                                                version=settings.sglang_version))
    except ToolError as err:
        return None, str(err)
    return info, ""


def check_gpus(settings: Settings, executor: Executor) -> GpuChoice:
    """The GPUs the campaign may use where its jobs run (this machine, the SSH host, the Slurm
    partition), checked against the request: GpuRequestError (a usage error) when it cannot be met."""
    where = "here" if not executor.capabilities.gpus_from_elsewhere else f"on {settings.executor}"
    return choose_gpus(executor.detect_gpus(), wanted=settings.gpus, tp=settings.tp, nodes=settings.nodes,
                       allow_busy=settings.allow_busy_gpus, target_gpus=settings.target_gpus, where=where)


def _checkpoint_config(settings: Settings, notes: list[str]) -> CheckpointConfig | None:
    """--model-path's config.json, read here once for the whole campaign (None: not given or unreadable)."""
    if not settings.model_path:
        return None
    if not config_path(settings.model_path).exists():
        notes.append(f"no config.json in --model-path {settings.model_path}")
        return None
    try:
        return read_config(settings.model_path)
    except ToolError as err:
        notes.append(f"checkpoint not read: {err}")
        return None


def _checkpoint(config: CheckpointConfig | None, source: SourceInfo | None, notes: list[str]) -> CheckpointFacts | None:
    """The checkpoint's facts, from the config read above (SGLang's rules decide its drafters)."""
    if source is None or config is None:
        return None
    try:
        facts = checkpoint_facts(config, source.package_dir)
    except ToolError as err:
        notes.append(f"checkpoint not read: {err}")
        return None
    notes += [f"checkpoint: {line}" for line in facts.unknowns]
    return facts


def _architecture(settings: Settings, config: CheckpointConfig | None, source: SourceInfo | None,
                  notes: list[str]) -> Architecture:
    """The architecture, decided once (tools/checkpoint/architecture.py); an --arch config.json contradicts is a note."""
    decided = decide_architecture(settings.model, settings.arch, config, source.root if source else None,
                                  source.package_dir if source else None)
    notes += [decided.disagreement()] if decided.disagreement() else []
    return decided


def run_preflight(settings: Settings, executor: Executor, checked: GpuChoice | None = None) -> Preflight:
    """What this configuration finds; ``checked`` is the GPU check the campaign made a moment ago
    (before any step), taken as it is rather than asking nvidia-smi again."""
    notes: list[str] = []
    choice = checked or check_gpus(settings, executor)
    gpus = choice.gpus
    remote = executor.capabilities.gpus_from_elsewhere
    if not gpus:
        notes.append(f"no GPU: {'; '.join(choice.notes)}; GPU steps will be planned, not run")
    else:
        notes += choice.notes
    if settings.plan_only:
        notes.append("--plan-only: every script is written, no GPU job is started; `dsv4-agent resume RUN` runs them")
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
    config = _checkpoint_config(settings, notes)
    checkpoint = _checkpoint(config, source, notes)
    architecture = _architecture(settings, config, source, notes)
    # the source is read here: jobs elsewhere (SSH) tune from their host's tree, which preflight does not read
    caveats = [] if remote else tuning_caveats(settings, gpus[0].name if gpus else "", source.root if source else None)
    in_place = None if remote else configs_in_place(InPlaceArgs(sglang_python=settings.sglang_python,
                                                                sglang_root=source.root if source else None))
    return Preflight(gpus=gpus, sglang_root=source.root if source else None, sglang_source=source,
                     sglang_python=python, checkpoint_config=config, checkpoint=checkpoint,
                     architecture=architecture,
                     executor=str(settings.executor), notes=notes, tuning_caveats=caveats, kernel_configs=in_place,
                     gpu_plan=choice.plan)
