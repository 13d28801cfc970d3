"""The LLM budget: model turns, tokens and wall time. Exhausting it ends the run with status
``budget_exhausted`` (exit code 3), never with a half-made plan.

The counts come from the recorded conversation (``agent.campaign.llm.conversation``), so a resumed run
continues with what the killed one had already spent. Seconds are the time spent in model calls
and tool dispatch, not the time the agent was dead between a kill and a resume. The LLM research
lane spends from the same counters (``agent.campaign.llm.research``); there, running out ends the research,
not the run.
"""
from __future__ import annotations

from dataclasses import dataclass

# Defaults of the settings llm_max_tokens / llm_max_seconds: generous ceilings that stop a model
# looping on cheap turns.
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
    seconds: float = 0.0
    purpose: str = "a plan"  # what the turns were for, named when the budget runs out

    @property
    def steps_left(self) -> int:
        return max(0, self.max_steps - self.steps)

    def before_turn(self) -> None:
        """Raise when another model turn would exceed a limit."""
        if self.steps >= self.max_steps:
            raise BudgetExhausted(f"LLM budget exhausted: {self.steps} model turns (limit {self.max_steps}) "
                                  f"without {self.purpose}; raise it with --max-llm-steps (or max_llm_steps in "
                                  "dsv4-agent.toml, DSV4_MAX_LLM_STEPS) or state the goal more precisely")
        if self.tokens >= self.max_tokens:
            raise BudgetExhausted(f"LLM budget exhausted: {self.tokens} tokens (limit {self.max_tokens}) "
                                  f"without {self.purpose}; raise it with --llm-max-tokens or state the goal more precisely")
        if self.seconds >= self.max_seconds:
            raise BudgetExhausted(f"LLM budget exhausted: {self.seconds:.0f} s (limit {self.max_seconds:.0f} s) "
                                  f"without {self.purpose}; raise it with --llm-max-seconds, use a faster endpoint, "
                                  "or state the goal more precisely")

    def snapshot(self) -> dict:
        return {"steps": self.steps, "max_steps": self.max_steps, "tokens": self.tokens,
                "max_tokens": self.max_tokens, "seconds": round(self.seconds, 2)}
