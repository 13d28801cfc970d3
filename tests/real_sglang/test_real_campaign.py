"""A campaign planned here (``--plan-only``) and resumed as on a GPU host, its baseline served by the
real SGLang: the agent is killed with SIGKILL while the real server runs, resumed again, and must
neither start a second server beside it nor leave one behind; it ends with result.json and a report.

The GPU is the nvidia-smi double (tests/campaign_fixtures.py): on this CPU machine it only makes the
host look like one with a GPU; the server itself runs on the CPU (tests/real_sglang/conftest.py).
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.campaign_fixtures import campaign_env
from tests.cli_helpers import agent, only_run, run_cli, start_agent, wait_for
from tests.real_sglang.conftest import STARTUP_S, TIER, RealSglang, alive_in_group, gsm8k_file, healthy, plan_args
from tools.measure.server_check import port_taken

pytestmark = TIER


def _server_jobs(run: Path) -> list[Path]:
    return sorted(p for p in (run / "jobs").glob("serve-baseline*") if (p / "job.json").exists())


def _server_group(job: Path) -> int | None:
    try:
        return json.loads((job / "wrapper.json").read_text())["child_pgid"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _port(job: Path) -> int:
    argv = json.loads((job / "job.json").read_text())["argv"]
    return int(argv[argv.index("--port") + 1])


@pytest.fixture(scope="module")
def campaign(real_sglang: RealSglang, tmp_path_factory):
    home = tmp_path_factory.mktemp("campaign")
    env = campaign_env(home, gpus=1)  # the GPU host, reviewed first: planned there, then resumed there
    planned = run_cli(*plan_args(real_sglang, "--plan-only", "--accuracy-data", str(gsm8k_file(home)),
                                 "--accuracy-questions", "4"), cwd=home, env=env)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    run = only_run(home)
    first = start_agent("resume", str(run), cwd=home, env=env)

    def running(value):
        if first.poll() is not None:
            raise AssertionError(f"resume ended ({first.returncode}) before the test killed it:\n{first.communicate()[0]}")
        return value

    try:
        job = wait_for(lambda: running(next(iter(_server_jobs(run)), None)), 300, "the server job")
        pgid = wait_for(lambda: running(_server_group(job)), 300, "the server's process group")
        port = _port(job)
        wait_for(lambda: running(healthy(f"http://127.0.0.1:{port}")), STARTUP_S, "the real server's /health")
    finally:
        first.send_signal(signal.SIGKILL)
        first_out = first.communicate()[0]
    alive_after_kill = alive_in_group(pgid)
    second = agent("resume", str(run), cwd=home, env=env, timeout=STARTUP_S + 300)
    return {"run": run, "pgid": pgid, "port": port, "alive_after_kill": alive_after_kill, "first": first_out,
            "second": second, "jobs": _server_jobs(run)}


def test_resume_after_a_kill_finishes_with_a_result_and_a_report(campaign):
    second, run = campaign["second"], campaign["run"]
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"]["benchmark"] == "done", result
    assert (run / "report.html").exists() and "baseline" in (run / "report.md").read_text()
    records = [json.loads(line) for line in (run / "bench" / "baseline.jsonl").read_text().splitlines()]
    assert sorted(r["max_concurrency"] for r in records) == [1, 2]
    assert all(r["server_info"]["version"] == "0.5.23" for r in records)  # measured on the real server


def test_the_killed_agents_server_was_taken_up_not_doubled(campaign):
    assert campaign["alive_after_kill"], "SIGKILL of the agent does not stop its jobs: the server ran on"
    assert len(campaign["jobs"]) == 1, campaign["jobs"]  # the second resume started no server of its own
    (job,) = campaign["jobs"]
    assert _server_group(job) == campaign["pgid"]  # the same process group: the server was taken up, not restarted
    records = [json.loads(line) for line in (campaign["run"] / "bench" / "baseline.jsonl").read_text().splitlines()]
    assert {r["server_info"]["port"] for r in records} == {campaign["port"]}  # every point on that one server


def test_no_server_is_left_when_the_run_has_finished(campaign):
    assert alive_in_group(campaign["pgid"]) == []  # launcher, scheduler, detokenizer: all gone
    assert not port_taken("127.0.0.1", campaign["port"])


def test_the_accuracy_gate_reports_the_real_score(campaign):
    run = campaign["run"]
    accuracy = json.loads((run / "bench" / "accuracy" / "baseline.json").read_text())
    assert accuracy["error"] is None and accuracy["accuracy"] is not None and accuracy["accuracy"] <= 0.25
    assert "cannot tell variants apart" in (run / "report.md").read_text()
