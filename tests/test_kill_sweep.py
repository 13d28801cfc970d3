"""The kill sweep: a real campaign SIGKILLed at chosen instants, then resumed and replayed.

Each kill point is a call the agent makes (tests/fault_injector.py kills the process right before it,
or right after it returned): a trace event being written, and each checkpoint LangGraph saves, just
before and just after it is on disk. Whatever the instant: ``resume`` finishes the run without a
traceback, no job is started twice and no tuning unit is tuned twice, and the run replays to exit 0,
the resumed attempt included (the trace, not the luck of the kill, says which checkpoint the run
stands on: agent/campaign/checkpoints.py). The campaign runs on the doubles of tests/campaign_fixtures.py.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import clean_env, only_run, run_cli
from tests.slowdown import limit

REPO = Path(__file__).resolve().parents[1]
INJECTOR = REPO / "tests" / "fault_injector.py"
SAVE = "agent.campaign.traced_saver:TracedSaver.put"
EVENT = "agent.run.trace:TraceWriter._append"
KILL_POINTS = ([f"{SAVE}:{n}:{when}" for n in range(1, 10) for when in ("before", "after")]
               + [f"{EVENT}:{n}:{when}" for n in (1, 2, 5, 12, 20, 28, 36) for when in ("before", "after")])


def _point_id(point: str) -> str:
    _module, name, n, when = point.split(":")
    return f"{'save' if name.endswith('put') else 'event'}{n}-{when}"


@pytest.mark.parametrize("point", KILL_POINTS, ids=[_point_id(p) for p in KILL_POINTS])
def test_a_run_killed_at_any_point_resumes_once_and_replays_exactly(tmp_path, sglang_wheel_root, point):
    env = campaign_env(tmp_path, unit_s=0.05)
    spec = point.removesuffix(":before")
    died = subprocess.run([sys.executable, str(INJECTOR), spec, "agent.commands.cli:main",
                           *campaign_args(tmp_path, sglang_wheel_root, "tune kernels")],
                          cwd=tmp_path, env=clean_env(env), capture_output=True, text=True, timeout=limit(240))
    if died.returncode == 0:
        pytest.skip(f"the run ended before {point} (it makes fewer such calls)")
    assert died.returncode == -signal.SIGKILL, died.stdout + died.stderr
    run = only_run(tmp_path)
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stdout + resumed.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    tune_jobs = sorted(p.name for p in (run / "jobs").iterdir() if p.name.startswith("tune-"))
    assert tune_jobs == ["tune-gpu0", "tune-gpu1"], tune_jobs  # re-attached, never started twice
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1, calls  # no unit tuned twice
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()
