"""Servers never outlive their run (issue 31 item 5, docs/servers.md), with real processes.

The agent is killed (SIGKILL, tests/fault_injector.py) right after a variant's last point, before
its server is stopped; or the agent, the server's wrapper and its job leader are all killed while
the server itself lives on. ``resume`` then finishes with no server process of the run alive
(checked by the process groups the job folders' wrapper.json record), never with two servers alive
at once, and a server it cannot prove its own is refused by name. The campaign runs on the doubles
of tests/campaign_fixtures.py.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env
from tests.cli_helpers import clean_env, only_run, run_cli, start_agent, wait_for
from tests.messages import assert_refusal
from tests.own_processes import group_members_since
from tests.slowdown import limit
from tools.jobs import processes

INJECTOR = Path(__file__).with_name("fault_injector.py")
GOAL = "enable MTP"  # two variants, baseline then mtp: one server each, one after the other
VARIANTS = ("baseline", "mtp")


def _wrapper(run: Path, key: str) -> dict:
    return json.loads((run / "jobs" / key / "wrapper.json").read_text())


def _alive_in_group(wrapper: dict) -> list[int]:
    """Processes in the job's process group that started after its leader: the job's, whatever the
    ledger says of them."""
    return group_members_since(wrapper["child_pgid"], wrapper["child_start_time"])


def servers_alive(run: Path) -> dict[str, list[int]]:
    """Server jobs of the run (serve-*, discovery*) with a process alive, and those processes."""
    alive = {}
    for ledger in sorted((run / "jobs").glob("*/wrapper.json")) if (run / "jobs").is_dir() else []:
        if ledger.parent.name.startswith(("serve-", "discovery")):
            with contextlib.suppress(ValueError, OSError):  # a wrapper.json being written
                pids = _alive_in_group(json.loads(ledger.read_text()))
                if pids:
                    alive[ledger.parent.name] = pids
    return alive


@contextlib.contextmanager
def most_servers_alive_at_once(run: Path):
    """The largest number of server jobs seen alive together while the block runs (looked at every 50 ms)."""
    seen = {"most": 0}
    done = threading.Event()

    def look() -> bool:
        seen["most"] = max(seen["most"], len(servers_alive(run)))
        return done.is_set()

    watcher = threading.Thread(target=wait_for, args=(look, 900, "the resume to end"), daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()


@pytest.fixture
def leftovers(tmp_path):
    """Kill, after the test, every process still in a job group of its runs (a failed test's)."""
    yield
    for ledger in tmp_path.glob("runs/*/jobs/*/wrapper.json"):
        with contextlib.suppress(ValueError, OSError):
            for pid in _alive_in_group(json.loads(ledger.read_text())):
                os.kill(pid, signal.SIGKILL)


def _killed_at(root: Path, args: list[str], env: dict, call: str) -> Path:
    """The agent run until the injected SIGKILL at ``call`` (MODULE:FUNCTION:N)."""
    died = subprocess.run([sys.executable, str(INJECTOR), call, "agent.commands.cli:main", *args], cwd=root,
                          env=clean_env(env), capture_output=True, text=True, timeout=limit(300))
    assert died.returncode == -signal.SIGKILL, died.stdout + died.stderr
    return only_run(root)


def _result(run: Path) -> dict:
    return json.loads((run / "result.json").read_text())


def _measured(run: Path) -> dict[str, list[str]]:
    files = {v: run / "bench" / f"{v}.jsonl" for v in VARIANTS}
    return {v: [json.loads(line)["tag"] for line in f.read_text().splitlines()] for v, f in files.items() if f.exists()}


def _kill_wrapper_and_leader(run: Path, key: str) -> list[int]:
    """SIGKILL the job's wrapper and its leader, not its group: the server lives on. Its pids."""
    wrapper = _wrapper(run, key)
    server = [p for p in _alive_in_group(wrapper) if p != wrapper["child_pgid"]]
    os.kill(wrapper["pid"], signal.SIGKILL)
    os.kill(wrapper["child_pgid"], signal.SIGKILL)
    wait_for(lambda: processes.start_time(wrapper["pid"]) is None and
             processes.start_time(wrapper["child_pgid"]) is None, 30, "the wrapper and the leader to die")
    assert server and _alive_in_group(wrapper) == server  # the server itself runs on, leaderless
    return server


BENCH = "tools.measure.bench"
# (kill point, the server jobs running when the agent dies there): around each server's last use
SERVER_KILLS = [
    (f"{BENCH}:stop_server:1", ["serve-baseline"]),       # baseline's last point measured, its server not stopped
    (f"{BENCH}:stop_server:2", ["serve-mtp"]),            # the same for the last variant: nothing follows it
    (f"{BENCH}:take_snapshot:2", ["serve-baseline"]),     # baseline's point measured, its closing snapshot not taken
    (f"{BENCH}:stop_server:1:after", []),                 # baseline's server stopped, its end not yet traced
    (f"{BENCH}:run_point:2", ["serve-mtp"]),              # mtp's server ready, its point not begun
]


@pytest.mark.parametrize("point,running", SERVER_KILLS,
                         ids=[p.removeprefix(BENCH + ":").replace(":", "-") for p, _ in SERVER_KILLS])
def test_a_run_killed_around_a_servers_last_use_resumes_to_finished_with_no_server_left(
        tmp_path, sglang_wheel_root, leftovers, point, running):
    env = campaign_env(tmp_path)
    run = _killed_at(tmp_path, campaign_args(tmp_path, sglang_wheel_root, GOAL), env, point)
    assert sorted(servers_alive(run)) == running  # the kill point is what it says

    with most_servers_alive_at_once(run) as seen:
        out = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _result(run)["status"] == "finished"
    assert servers_alive(run) == {}
    assert seen["most"] == 1  # a leftover server was stopped before the next one started
    assert _measured(run) == {v: [f"{v}-c1"] for v in VARIANTS}  # nothing measured twice
    if running:  # the server that ran at the kill was re-attached or stopped, never started again
        assert not (run / "jobs" / f"{running[0]}-a2").exists()


def test_a_server_whose_agent_wrapper_and_leader_were_killed_is_measured_on_then_stopped(tmp_path, sglang_wheel_root,
                                                                                       leftovers):
    hold = tmp_path / "hold-requests"
    hold.touch()  # the first point stays open until the session has gone down inside it
    env = {**campaign_env(tmp_path), "DSV4_DOUBLE_HOLD_FILE": str(hold)}
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, GOAL), cwd=tmp_path, env=env)
    run = wait_for(lambda: next(iter((tmp_path / "runs").glob("*/jobs/bench-baseline-c1/wrapper.json")), None)
                   and only_run(tmp_path), 240, "the first point's bench client")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=limit(10))
    server = _kill_wrapper_and_leader(run, "serve-baseline")
    hold.unlink()
    wait_for((run / "jobs" / "bench-baseline-c1" / "exit.json").exists, 120, "the point to end while the agent is away")

    with most_servers_alive_at_once(run) as seen:
        out = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert _result(run)["status"] == "finished"
    assert servers_alive(run) == {} and all(processes.start_time(p) is None for p in server)
    assert seen["most"] == 1
    assert _measured(run) == {v: [f"{v}-c1"] for v in VARIANTS}
    assert not (run / "jobs" / "serve-baseline-a2").exists()  # measured on the server that lived on
    jobs = {j["key"]: j["status"] for j in json.loads(run_cli("jobs", str(run), "--json", cwd=tmp_path).stdout)}
    assert jobs["serve-baseline"] == "stopped"


def test_a_server_that_cannot_be_proven_ours_is_refused_by_name_and_the_run_is_not_finished(tmp_path,
                                                                                          sglang_wheel_root,
                                                                                          leftovers):
    """The server drops the job token from its environment (a launcher that cleans it), so once its
    wrapper and leader are gone nothing proves it ours: it is never signalled, nothing is started beside
    it, the run ends failed naming it, and `jobs --stop` fails in one line."""
    python = tmp_path / "sglang-python-without-token"
    python.write_text(f"#!/bin/sh\nunset {processes.TOKEN_VARIABLE}\nexec {DOUBLES / 'sglang_python'} \"$@\"\n")
    python.chmod(0o755)
    env = campaign_env(tmp_path)
    args = [*campaign_args(tmp_path, sglang_wheel_root, GOAL), "--sglang-python", str(python)]
    run = _killed_at(tmp_path, args, env, "tools.measure.bench:stop_server:1")
    server = _kill_wrapper_and_leader(run, "serve-baseline")

    out = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    result = _result(run)
    assert result["status"] == "failed"
    assert len(result["servers_left"]) == 1 and "serve-baseline" in result["servers_left"][0]
    assert f"pids {server[0]}" in result["servers_left"][0] and "serve-baseline" in result["summary"]
    assert all(processes.start_time(p) is not None for p in server)  # never signalled
    assert list(servers_alive(run)) == ["serve-baseline"]  # and nothing was started beside it
    assert not (run / "jobs" / "serve-mtp").exists()

    stop = run_cli("jobs", str(run), "--stop", "serve-baseline", cwd=tmp_path)
    assert_refusal(stop, "'serve-baseline'", "no job token", f"pids {server[0]}")
