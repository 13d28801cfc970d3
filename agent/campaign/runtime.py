"""What every graph node needs but the checkpointed state must not hold: live objects."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

from agent.settings.model import Settings
from agent.campaign.record_source import LiveSource, RecordSource
from agent.run.folder import RunFolder
from agent.run.trace import TraceWriter
from tools.jobs import Executor

if TYPE_CHECKING:
    import threading

    from agent.steps.base import PlanStep
    from agent.terminal.live import LiveView
    from agent.campaign.preflight import Preflight
    from agent.campaign.llm.registry import Registry
    from tools.mtp.settings import MtpSettings


class ChatClient(Protocol):
    """One model turn at a time: ``agent.campaign.llm.client.LLMClient``, or a replay's ``ReplayLLM``."""

    model: str | None

    def chat(self, messages: list[dict], tools: list[dict], call: int | None = None) -> dict: ...


class EarlyGpuLane(Protocol):
    """The GPU lane started before the graph (``agent.campaign.early_lane.EarlyLane``), as the graph sees it."""

    under_way: threading.Event  # set at the lane's first launch, or when it ends without one

    def result(self, steps: list[PlanStep]) -> dict: ...


@dataclass
class Runtime:
    settings: Settings
    run: RunFolder
    trace: TraceWriter
    executor: Executor
    goal: str
    say: Callable[[str], None] = print          # one line for the person at the terminal
    view: LiveView | None = None                # the terminal view; restored before a hard exit
    source: RecordSource = field(default_factory=LiveSource)  # the world, or a recorded run
    llm: ChatClient | None = None               # built from settings on first use (agent.campaign.llm.loop.client)
    planner_tools: Registry | None = None       # the tools the LLM planner may call, built once per process
    research_tools: Registry | None = None      # the research lane's read-only subset
    mtp_settings: MtpSettings | None = None     # worked out up front when --mtp-steps was given (once per run)
    trace_checkpoints: bool = True              # record each checkpoint saved (a replay of an older run: off)
    early_preflight: Preflight | None = None    # found before the graph, for its preflight node (agent/campaign/early_lane.py)
    early_gpu_lane: EarlyGpuLane | None = None  # the GPU lane started before the graph, for its gpu_lane node

