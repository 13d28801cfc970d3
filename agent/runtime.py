"""What every graph node needs but the checkpointed state must not hold: live objects."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.config import Settings
from agent.runfolder import RunFolder
from agent.trace import TraceWriter
from tools.jobs import Executor


@dataclass
class Runtime:
    settings: Settings
    run: RunFolder
    trace: TraceWriter
    executor: Executor
    goal: str
    say: Callable[[str], None] = print          # one line for the person at the terminal
    extras: dict = field(default_factory=dict)  # e.g. the LLM client, set by the LLM mode

    @property
    def run_dir(self) -> Path:
        return self.run.path
