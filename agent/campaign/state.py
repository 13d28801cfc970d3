"""The campaign's checkpointed state: small plain data; payloads live in the run folder."""
from __future__ import annotations

from typing import Annotated, TypedDict


def merge(left: dict | None, right: dict | None) -> dict:
    """Reducer for values written by both lanes in one superstep."""
    return {**(left or {}), **(right or {})}


class LlmLoop(TypedDict, total=False):
    """The LLM planning loop's counters; the conversation itself is the file at ``conversation``."""
    conversation: str                        # run-folder-relative path of llm/conversation.jsonl
    phase: str                               # replied | observed | submitted (see agent/campaign/llm/planning_nodes.py)
    turns: int
    tokens: int
    seconds: float
    answered: bool                           # a valid submit_plan is recorded


class CampaignState(TypedDict, total=False):
    goal: str
    preflight: dict                          # see agent/campaign/preflight.py; also preflight.json
    llm: LlmLoop                             # only on the LLM planner's path
    steps: list[dict]                        # PlanStep dumps, campaign order; also plan.json
    outcomes: Annotated[dict, merge]         # step kind → StepOutcome dump; also steps/<kind>.json
    status: str                              # exit status, set by the report node
