"""The LLM budget: model turns, tokens and wall time. Exhausting it ends the run with status
``budget_exhausted`` (exit code 3), never with a half-made plan."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

# Settings carry the step limit (max_llm_steps); tokens and time are generous fixed ceilings
# that stop a model looping on cheap turns.
DEFAULT_MAX_TOKENS = 400_000
DEFAULT_MAX_SECONDS = 900.0


class BudgetExhausted(Exception):
    """The LLM used up its budget; the message says which limit and how to raise it."""


@dataclass
class Budget:
    max_steps: int
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_seconds: float = DEFAULT_MAX_SECONDS
    steps: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def steps_left(self) -> int:
        return max(0, self.max_steps - self.steps)

    def before_turn(self) -> None:
        """Raise when another model turn would exceed a limit."""
        if self.steps >= self.max_steps:
            raise BudgetExhausted(f"LLM budget exhausted: {self.steps} model turns (limit {self.max_steps}) "
                                  "without a plan; raise max_llm_steps (dsv4-agent.toml or DSV4_MAX_LLM_STEPS) "
                                  "or state the goal more precisely")
        if self.tokens >= self.max_tokens:
            raise BudgetExhausted(f"LLM budget exhausted: {self.tokens} tokens (limit {self.max_tokens}) "
                                  "without a plan; state the goal more precisely")
        elapsed = time.monotonic() - self.started
        if elapsed >= self.max_seconds:
            raise BudgetExhausted(f"LLM budget exhausted: {elapsed:.0f} s (limit {self.max_seconds:.0f} s) "
                                  "without a plan; use a faster endpoint or state the goal more precisely")

    def charge(self, usage: dict) -> None:
        self.steps += 1
        self.tokens += int(usage.get("total", 0) or 0)

    def snapshot(self) -> dict:
        return {"steps": self.steps, "max_steps": self.max_steps, "tokens": self.tokens,
                "max_tokens": self.max_tokens, "seconds": round(time.monotonic() - self.started, 2)}
