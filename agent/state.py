"""The campaign's checkpointed state: small plain data; payloads live in the run folder."""
from __future__ import annotations

from typing import Annotated, TypedDict


def merge(left: dict | None, right: dict | None) -> dict:
    """Reducer for values written by both lanes in one superstep."""
    return {**(left or {}), **(right or {})}


class CampaignState(TypedDict, total=False):
    goal: str
    preflight: dict                          # see agent/preflight.py; also preflight.json
    steps: list[dict]                        # PlanStep dumps, campaign order; also plan.json
    outcomes: Annotated[dict, merge]         # step kind → StepOutcome dump; also steps/<kind>.json
    lanes_done: Annotated[dict, merge]       # lane → monotonic-free wall time it finished
    status: str                              # exit status, set by the report node
