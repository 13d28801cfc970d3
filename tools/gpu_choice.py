"""Which GPUs a campaign may use, and with which tensor parallelism: the user's request checked
against the GPUs that exist where the jobs run (tools/gpus.py).

A request that cannot be met is a usage error (``GpuRequestError``, exit 2 naming the GPUs there): a
missing index, a GPU twice, a TP larger than the GPUs or not dividing them, or a GPU someone else
uses unless ``--allow-busy-gpus``. Without GPUs the campaign plans for a target: ``--gpus`` or
``--target-gpus N``, else an 8-GPU node, said so; TP is ``--tp``, else every GPU of the node.

The answer is one ``GpuPlan``, made once by preflight and taken as it is by every consumer: the
tuning step (one job per GPU of ``tuning_gpus``, shapes at ``tp``), the serve and measure scripts and
their servers (``gpus``, ``tp``) and the multi-node scripts (``multinode_tp`` over ``nodes``).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from tools.defaults import ASSUMED_TARGET_GPUS
from tools.gpus import DetectGpusResult, GpuInfo



class GpuRequestError(Exception):
    """The GPUs asked for cannot be used; the message names them, the GPUs that exist, and the fix."""


class GpuPlan(BaseModel):
    """The campaign's one GPU plan (see the module docstring for who takes which part)."""

    gpus: list[int] | None = Field(None, description="GPU indices the scripts name; None: CUDA_VISIBLE_DEVICES as set")
    tp: int = Field(1, ge=1, description="Tensor parallel size of the single-node servers")
    node_gpus: int = Field(ge=1, description="GPUs of one node: those chosen here, else the target's (--gpus, "
                                             "--target-gpus N, else 8)")
    for_target: bool = Field(False, description="Planned without GPUs where the jobs run, for a target machine")
    nodes: int = Field(1, ge=1, description="Nodes one multi-node server spans (--nodes)")
    multinode_tp: int | None = Field(None, description="TP of the multi-node server (--tp, else every GPU of every "
                                                       "node); None with one node")
    notes: list[str] = Field(default_factory=list, description="How the TP was assumed when no GPU is here")

    @model_validator(mode="before")
    @classmethod
    def _recorded_before_node_gpus(cls, data: Any) -> Any:
        """A preflight.json written before the plan named its node's GPUs: the GPUs it names, else its TP."""
        if isinstance(data, dict) and "node_gpus" not in data:
            return {**data, "node_gpus": len(data.get("gpus") or []) or data.get("tp") or 1}
        return data

    @property
    def tuning_gpus(self) -> list[int]:
        """One tuning job per GPU of the node: the planned indices, else (a target named by its count) 0..N-1."""
        return list(self.gpus) if self.gpus is not None else list(range(self.node_gpus))

    def described(self) -> str:
        """The plan in one line, as the run's output states it (the same words for tuning and scripts)."""
        if self.gpus is None:
            where = (f"a target node of {self.node_gpus} GPUs (no GPU here; the servers take the GPUs "
                     "CUDA_VISIBLE_DEVICES gives)")
        else:
            where = f"GPUs {','.join(map(str, self.gpus))}{' of the target (no GPU here)' if self.for_target else ''}"
        across = f", {self.nodes} nodes at TP {self.multinode_tp}" if self.multinode_tp else ""
        return f"GPU plan: {where}, servers at TP {self.tp}{across}; tuning jobs on GPUs {_span(self.tuning_gpus)}"


class GpuChoice(BaseModel):
    gpus: list[GpuInfo] = Field(description="GPUs the jobs use here (empty: planning for another machine)")
    plan: GpuPlan = Field(description="What the scripts, servers and tuning jobs are given")
    notes: list[str] = Field(default_factory=list)


def _span(indices: list[int]) -> str:
    if indices and indices == list(range(indices[0], indices[-1] + 1)) and len(indices) > 2:
        return f"{indices[0]}-{indices[-1]}"
    return ",".join(map(str, indices))


def _multinode_tp(tp: int | None, node_gpus: int, nodes: int) -> int | None:
    return None if nodes <= 1 else (tp or node_gpus * nodes)


def _listing(gpus: list[GpuInfo]) -> str:
    return ", ".join(g.label() for g in gpus) or "none"


def _check_wanted(found: DetectGpusResult, wanted: list[int], where: str) -> list[GpuInfo]:
    repeated = sorted({i for i in wanted if wanted.count(i) > 1})
    if repeated:
        raise GpuRequestError(f"--gpus names GPU {', '.join(map(str, repeated))} more than once; list each GPU once")
    known = {g.index: g for g in found.gpus}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        hidden = f" ({found.note})" if found.note else ""
        raise GpuRequestError(f"--gpus names GPU {', '.join(map(str, unknown))}, which is not a GPU {where}; "
                              f"GPUs {where}: {_listing(found.gpus)}{hidden}")
    return [known[i] for i in wanted]


def _check_busy(chosen: list[GpuInfo], everything: list[GpuInfo], where: str) -> None:
    busy = [g for g in chosen if g.busy]
    if not busy:
        return
    free = [str(g.index) for g in everything if not g.busy]
    held = "; ".join(f"GPU {g.label()} is busy: {g.holders()}" for g in busy)
    hint = f"--gpus {','.join(free)} (free {where})" if free else "waiting until they are free"
    raise GpuRequestError(f"{held}. Another job may be using it; pick free GPUs with {hint}, "
                          "or pass --allow-busy-gpus to share them anyway")


def choose_gpus(found: DetectGpusResult, *, wanted: list[int] | None, tp: int | None, nodes: int = 1,
                allow_busy: bool = False, target_gpus: int | None = None, where: str = "here") -> GpuChoice:
    if not found.gpus:
        return _plan_without_gpus(wanted, tp, nodes, target_gpus, found.note)
    if target_gpus is not None:
        raise GpuRequestError(f"--target-gpus plans for a machine without GPUs, but GPUs exist {where} "
                              f"({_listing(found.gpus)}); choose among them with --gpus")
    chosen = _check_wanted(found, wanted, where) if wanted is not None else list(found.gpus)
    if not allow_busy:
        _check_busy(chosen, found.gpus, where)
    if tp is not None and tp > len(chosen) * nodes:
        raise GpuRequestError(f"--tp {tp} needs {tp} GPUs, but {len(chosen) * nodes} are chosen "
                              f"({_listing(chosen)}{f' on each of {nodes} nodes' if nodes > 1 else ''}); "
                              f"lower --tp or choose more GPUs with --gpus")
    _check_divides(tp, len(chosen) * nodes, f"the {len(chosen) * nodes} chosen GPUs", "choose GPUs with --gpus")
    notes = [found.note] if found.note else []
    plan = GpuPlan(gpus=[g.index for g in chosen], tp=tp or len(chosen), node_gpus=len(chosen), nodes=nodes,
                   multinode_tp=_multinode_tp(tp, len(chosen), nodes))
    return GpuChoice(gpus=chosen, plan=plan, notes=notes)


def _check_divides(tp: int | None, count: int, what: str, other: str) -> None:
    """SGLang's single-node server takes TP GPUs of those it sees: a TP that does not divide them leaves
    some idle, and no layout of whole servers uses them all."""
    if tp is None or count % tp == 0:
        return
    divisors = ", ".join(str(d) for d in range(1, count + 1) if count % d == 0)
    raise GpuRequestError(f"--tp {tp} does not divide {what} ({count % tp} would sit idle); pass a --tp that "
                          f"divides {count} ({divisors}), or {other} so that {tp} divides their number")


def _plan_without_gpus(wanted: list[int] | None, tp: int | None, nodes: int, target_gpus: int | None,
                       note: str) -> GpuChoice:
    if wanted is not None and target_gpus is not None and len(wanted) != target_gpus:
        raise GpuRequestError(f"--gpus lists {len(wanted)} GPUs but --target-gpus says {target_gpus}; give one of them")
    if wanted is not None and len(set(wanted)) != len(wanted):
        raise GpuRequestError("--gpus names a GPU more than once; list each GPU of the target once")
    count = len(wanted) if wanted is not None else target_gpus
    notes = [note] if note else []
    if count is None:
        count = ASSUMED_TARGET_GPUS
        notes.append(f"no GPU here and no --target-gpus: planning for a {count}-GPU target node; pass "
                     "--target-gpus N (or --gpus for the target's indices) to plan for another")
    if tp is not None and tp > count * nodes:
        raise GpuRequestError(f"--tp {tp} needs {tp} GPUs, but the target has {count * nodes}; lower --tp or "
                              "raise --target-gpus")
    _check_divides(tp, count * nodes, f"the target's {count * nodes} GPUs", "give the target's GPU count with "
                   "--target-gpus N")
    chosen_tp = tp or count
    assumed = (f"assumed TP {chosen_tp} ({'--tp' if tp else f'{count} target GPUs'}); the scripts take TP and "
               "GPUS from the environment when set")
    plan = GpuPlan(gpus=wanted, tp=chosen_tp, node_gpus=count, for_target=True, nodes=nodes,
                   multinode_tp=_multinode_tp(tp, count, nodes), notes=[assumed])
    return GpuChoice(gpus=[], plan=plan, notes=[*notes, assumed])
