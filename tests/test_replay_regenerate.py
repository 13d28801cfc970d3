"""The committed goldens are what the campaign does today: regenerate one and compare decisions.

A failure here means the campaign's decisions changed (a step landed, the planner changed):
look at the difference, and if it is intended run ``.venv/bin/python tests/make_golden.py``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.replay.checker import DecisionChecker, ReplayDivergence
from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.replay.record import classify, load_recording
from tests.make_golden import GOLDEN, run_campaign


def _decisions_with_run_path(run: Path) -> list[dict]:
    """The run's decisions with its own folder path replaced, so two runs compare."""
    text = (run / "trace.jsonl").read_text()
    where = json.loads((run / "result.json").read_text())["run"]
    events = [json.loads(line.replace(json.dumps(where)[1:-1], "<RUN>")) for line in text.splitlines()]
    return classify(events)[0]


@pytest.mark.parametrize("name", ["playbook-mtp-tune", "llm-mtp"])
def test_regenerated_run_matches_committed_golden(name, tmp_path):
    fresh = run_campaign(name, tmp_path)
    assert replay_run(fresh).exit_code == ExitCode.DONE
    golden = load_recording(GOLDEN / name)
    golden.events = _decisions_with_run_path(GOLDEN / name)
    checker = DecisionChecker(golden)
    try:
        for event in _decisions_with_run_path(fresh):
            checker.observe(event)
    except ReplayDivergence as err:
        pytest.fail(f"the campaign no longer makes the golden's decisions: {err}; "
                    "if intended, regenerate with tests/make_golden.py")
    assert checker.finish() is None
    assert json.loads((fresh / "plan.json").read_text()) == golden.plan
