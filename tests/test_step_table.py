"""The step table is the one list of step kinds: the planners, the LLM's schema and the graph read it."""
from __future__ import annotations

from typing import get_args

import pytest

from agent.campaign.llm.plan_contract import PlanAnswer, ProposedStep, to_steps
from agent.campaign.playbook import plan_goal
from agent.steps.base import StepKind
from agent.steps.step_table import BY_KIND, STEP_ORDER, STEPS, kinds_at, node_lane


def test_every_step_kind_has_one_row_with_a_runner():
    assert sorted(STEP_ORDER) == sorted(get_args(StepKind)) and len(STEP_ORDER) == len(set(STEP_ORDER))
    for spec in STEPS:
        assert callable(spec.run) and spec.run.__module__ == f"agent.steps.{spec.kind}"


def test_the_llm_schema_offers_exactly_the_table_kinds():
    schema = PlanAnswer.model_json_schema()
    kinds = schema["$defs"]["ProposedStep"]["properties"]["kind"]["enum"]
    assert tuple(kinds) == STEP_ORDER


def test_both_planners_give_each_step_the_table_lane_in_table_order():
    playbook, _ = plan_goal("sync, tune kernels, enable MTP and benchmark")
    answer = PlanAnswer(steps=[ProposedStep(kind=k, why="w") for k in reversed(STEP_ORDER)])
    for steps in (playbook, to_steps(answer, {})):
        assert [s.kind for s in steps] == list(STEP_ORDER)
        assert all(s.lane == BY_KIND[s.kind].lane for s in steps)


def test_graph_nodes_run_their_kinds_in_one_lane():
    assert kinds_at("research_lane") == ("infer_mtp", "write_scripts")
    assert [node_lane(n) for n in ("sync", "gpu_lane", "research_lane", "measure")] == [
        "control", "gpu", "research", "gpu"]
    with pytest.raises(ValueError, match="one"):
        node_lane("plan")  # type: ignore[arg-type]  # runs no step
