"""The step table: every step kind, in campaign order, with its lane and the graph node that runs it
(``STEPS``). The playbook, the LLM planner's step schema and the graph's lanes are read from here.

A new step kind is a module ``agent/steps/<kind>.py`` with ``run(ctx, step) -> StepOutcome``, a name
in ``StepKind`` (agent/run/step_outcome.py), a row in ``STEPS``, and its description in
prompts/planner_system.md.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal

from agent.steps.base import PlanStep, StepContext, StepKind, StepOutcome
from agent.run.trace import Lane

Node = Literal["sync", "gpu_lane", "research_lane", "measure"]


@dataclass(frozen=True)
class StepSpec:
    kind: StepKind
    lane: Lane
    node: Node
    # Settings a resume may give anew (paths of the host it runs on) that a finished outcome of this
    # step was made from: when one changes, the resume runs the step again instead of reusing it.
    host_inputs: tuple[str, ...] = ()
    reads_here: bool = False  # those paths are read where the agent runs (not where the jobs run)

    @property
    def run(self) -> Callable[[StepContext, PlanStep], StepOutcome]:
        """``agent.steps.<kind>.run``, imported when a lane first runs it (each lane pays for its own)."""
        return importlib.import_module(f"agent.steps.{self.kind}").run


STEPS: tuple[StepSpec, ...] = (
    StepSpec("sync", "control", "sync"),
    StepSpec("tune_kernels", "gpu", "gpu_lane"),
    StepSpec("infer_mtp", "research", "research_lane", ("sglang_src", "sglang_python", "model_path"), reads_here=True),
    # the scripts hold the interpreter, checkpoint and tokenizer paths, and the MTP answer's flags
    StepSpec("write_scripts", "research", "research_lane",
             ("sglang_src", "sglang_python", "model_path", "tokenizer", "accuracy_data")),
    StepSpec("benchmark", "gpu", "measure"),
)
BY_KIND: dict[str, StepSpec] = {spec.kind: spec for spec in STEPS}
STEP_ORDER: tuple[str, ...] = tuple(spec.kind for spec in STEPS)


def redone_by(changed: list[str] | set[str], jobs_elsewhere: bool = False) -> list[str]:
    """The step kinds whose finished outcomes a resume that changes these settings must not reuse.
    ``jobs_elsewhere`` (an SSH executor): the paths name the job host's files, so a step that reads
    its inputs where the agent runs keeps what it found here."""
    return [spec.kind for spec in STEPS
            if set(spec.host_inputs) & set(changed) and not (jobs_elsewhere and spec.reads_here)]


def kinds_at(node: Node) -> tuple[str, ...]:
    """The step kinds a graph node runs, in campaign order."""
    return tuple(spec.kind for spec in STEPS if spec.node == node)


def node_lane(node: Node) -> Lane:
    """The lane a step-running graph node works in: the lane of its steps."""
    lanes = {spec.lane for spec in STEPS if spec.node == node}
    if len(lanes) != 1:
        raise ValueError(f"graph node {node!r} runs steps of lanes {sorted(lanes)}; the table must give it one")
    return lanes.pop()


def plan_step(kind: StepKind, why: str, params: dict[str, Any] | None = None) -> PlanStep:
    """A plan step of ``kind``, in the lane the table gives it."""
    return PlanStep(kind=kind, lane=BY_KIND[kind].lane, why=why, params=dict(params or {}))
