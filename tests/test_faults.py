"""Faults a careful user's environment produces, met by a real campaign (on the doubles of
tests/campaign_fixtures.py): the terminal closed under the agent (SIGHUP, through a real pty), a
run folder's ``result.json`` that is not a result, a checkpoint cut short, a full disk.
Each must end in one line naming the problem and its fix, never a traceback, and leave a run
that resumes and replays exactly.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import termios
from collections import Counter
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env, graph_committed, hold_tuning
from tests.cli_helpers import AGENT, clean_env, only_run, run_cli, start_agent, wait_for
from tests.conftest import missing
from tests.messages import assert_finished_refused, assert_refusal, message_naming
from tests.slowdown import limit
from tools.jobs.processes import processes_of_job

GOAL = "tune kernels"


def _trace_text(root: Path) -> str:
    traces = list((root / "runs").glob("*/trace.jsonl")) if (root / "runs").exists() else []
    return traces[0].read_text(errors="replace") if traces else ""


def _take_terminal() -> None:
    """In the child: the pty on fd 0 becomes the controlling terminal of its new session, as a login
    shell's terminal is, so that closing the pty's other end hangs the session up (SIGHUP)."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _drain(fd: int, into: bytearray) -> bool:
    """Read what the agent wrote to its terminal so far, without blocking."""
    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return True
        if not chunk:
            return True
        into += chunk
    return False


def test_a_closed_terminal_interrupts_the_run_and_its_jobs_run_on(tmp_path, sglang_wheel_root):
    """SIGHUP (terminal closed, SSH dropped) is taken as SIGTERM is: ``interrupted``, exit 130, the
    detached tuning jobs run on, and ``resume`` finishes the run."""
    hold_env, hold = hold_tuning(tmp_path)  # the jobs are still tuning when the terminal goes away
    env = {**campaign_env(tmp_path, unit_s=0.05), **hold_env}
    master, slave = os.openpty()
    proc = subprocess.Popen([AGENT, *campaign_args(tmp_path, sglang_wheel_root, GOAL)], cwd=tmp_path,
                            env=clean_env({**env, "TERM": "xterm", "COLUMNS": "120"}), stdin=slave, stdout=slave,
                            stderr=slave, start_new_session=True, preexec_fn=_take_terminal, close_fds=True)
    os.close(slave)
    seen = bytearray()
    wait_for(lambda: not _drain(master, seen) and _trace_text(tmp_path).count('"type": "job_launched"') >= 2, 120,
             "the tuning jobs to start")
    _drain(master, seen)
    os.close(master)  # the terminal goes away: the kernel hangs up the agent's session
    assert proc.wait(timeout=limit(120)) == 130
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "interrupted" and "SIGHUP" in result["summary"], result
    assert f"(`dsv4-agent jobs {run.relative_to(tmp_path)} --stop all` stops them)" in result["summary"]  # or resume
    events = read_trace(run / "trace.jsonl").events
    assert [e["seq"] for e in events] == list(range(len(events)))
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["signal"] == "SIGHUP", finished
    running = finished["jobs_running"]
    assert running and all(k.startswith("tune-gpu") for k in running), finished
    assert b"Traceback" not in seen, seen.decode(errors="replace")
    hold.unlink()
    for key in running:  # the hangup did not reach them: they end by themselves, successfully
        wait_for(lambda key=key: (run / "jobs" / key / "exit.json").exists(), 120, f"{key} to end")
        assert json.loads((run / "jobs" / key / "exit.json").read_text())["exit_code"] == 0
    out = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, sglang_wheel_root) -> Path:
    root = tmp_path_factory.mktemp("finished")
    out = run_cli(*campaign_args(root, sglang_wheel_root, GOAL), cwd=root, env=campaign_env(root, unit_s=0.05))
    assert out.returncode == 0, out.stdout + out.stderr
    return only_run(root)


BAD_RESULTS = [(b"[1, 2]", "not a JSON object (a JSON list)"), (b'"finished"', "not a JSON object (a JSON str)"),
               (b'{"status": "finished", "summ', "not JSON"), (b"\xff\xfe", "not UTF-8"),
               (b'{"status": "great"}', "status 'great' is none of"), (b"null", "a JSON NoneType")]


@pytest.mark.parametrize("content, problem", BAD_RESULTS)
def test_a_result_json_that_is_no_result_is_one_line_in_every_command(finished_run, content, problem):
    root = finished_run.parent.parent
    env = campaign_env(root)
    good = (finished_run / "result.json").read_bytes()
    (finished_run / "result.json").write_bytes(content)
    try:
        status = run_cli("status", str(finished_run), cwd=root, env=env)
        assert status.returncode == 0, status.stderr
        line = next(x for x in status.stdout.splitlines() if x.startswith("result: "))
        assert line.startswith(f"result: unreadable: {finished_run / 'result.json'} is ") and problem in line, line
        as_json = run_cli("status", str(finished_run), "--json", cwd=root, env=env)
        data = json.loads(as_json.stdout)
        assert data["result"] is None and problem in data["result_error"], data

        resumed = run_cli("resume", str(finished_run), cwd=root, env=env)
        assert_refusal(resumed, finished_run / "result.json", problem, "mv")
        assert (finished_run / "result.json").read_bytes() == content  # refused: nothing written

        listed = run_cli("runs", cwd=root, env=env)
        assert listed.returncode == 0 and f"{finished_run.name}  unreadable" in listed.stdout, listed.stdout
        cleaned = run_cli("runs", "--clean", "--older-than", "0s", "--dry-run", cwd=root, env=env)
        assert cleaned.returncode == 0 and "no result" in cleaned.stdout, cleaned.stdout + cleaned.stderr

        report = run_cli("report", str(finished_run), cwd=root, env=env)
        assert report.returncode == 0, report.stdout + report.stderr
        assert report.stderr.count("\n") == 1 and message_naming(report.stderr, problem, "mv", prefix="note: ")
        for out in (status, as_json, resumed, listed, cleaned, report):
            assert "Traceback" not in out.stdout + out.stderr
    finally:
        (finished_run / "result.json").write_bytes(good)


def test_a_damaged_result_json_moved_away_is_written_again_by_resume(finished_run):
    root = finished_run.parent.parent
    good = json.loads((finished_run / "result.json").read_text())
    (finished_run / "result.json").write_text("[]")
    os.replace(finished_run / "result.json", finished_run / "result.json.bad")  # the fix the line names
    again = run_cli("resume", str(finished_run), cwd=root, env=campaign_env(root))
    assert_finished_refused(again, finished_run.name)
    after = json.loads((finished_run / "result.json").read_text())
    assert {k: after[k] for k in ("status", "summary", "steps")} == {k: good[k] for k in ("status", "summary", "steps")}
    (finished_run / "result.json.bad").unlink()


def _killed_while_tuning(root: Path, wheel_root: Path) -> Path:
    held, hold = hold_tuning(root)
    proc = start_agent(*campaign_args(root, wheel_root, GOAL), cwd=root, env={**campaign_env(root, unit_s=0.4), **held})
    # the GPU lane starts before the graph: wait for the jobs and for a checkpoint that holds progress
    wait_for(lambda: list(root.glob("runs/*/jobs/tune-gpu1/wrapper.json")) and graph_committed(root), 120,
             "the tuning jobs and the graph's first saved superstep")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    hold.unlink()  # the jobs, detached, go on
    return only_run(root)


def _cut_in_half(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _overwrite(path: Path) -> None:
    path.write_bytes(b"\x00garbage, not SQLite\n" * 64)


@pytest.mark.parametrize("damage", [_cut_in_half, _overwrite, Path.unlink], ids=["cut", "overwritten", "deleted"])
def test_a_damaged_checkpoint_is_named_and_rebuilt_from_the_trace_and_the_ledgers(tmp_path, sglang_wheel_root, damage):
    run = _killed_while_tuning(tmp_path, sglang_wheel_root)
    env = campaign_env(tmp_path, unit_s=0.4)
    whole = run_cli("resume", str(run), "--rebuild-checkpoint", cwd=tmp_path, env=env)
    assert_refusal(whole, run / "checkpoint.sqlite", "whole", f"dsv4-agent resume {run}")
    checkpoint = run / "checkpoint.sqlite"
    for extra in (run / "checkpoint.sqlite-wal", run / "checkpoint.sqlite-shm"):
        extra.unlink(missing_ok=True)  # a copy of the folder without them, or a cut main file alone
    damage(checkpoint)
    trace_before = (run / "trace.jsonl").read_bytes()

    refused = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert_refusal(refused, run / "checkpoint.sqlite", "--rebuild-checkpoint")
    assert (run / "trace.jsonl").read_bytes() == trace_before and not (run / "result.json").exists()

    rebuilt = run_cli("resume", str(run), "--rebuild-checkpoint", cwd=tmp_path, env=env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    resumed = next(e for e in read_trace(run / "trace.jsonl").events if e["type"] == "run_resumed")
    assert resumed["rebuilt_checkpoint"], resumed
    launched = [p.name for p in (run / "jobs").iterdir()]
    assert sorted(launched) == ["tune-gpu0", "tune-gpu1"], launched  # re-attached, never started twice
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert calls and max(calls.values()) == 1  # no unit tuned twice

    again = run_cli("resume", str(run), "--rebuild-checkpoint", cwd=tmp_path, env=env)
    assert_finished_refused(again, run.name)



@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A 3 MB tmpfs: a disk that fills up for real (mounting needs root; elsewhere the test is skipped)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        missing("mounting a 3 MB tmpfs needs root (the CI container runs as root)")
    yield disk
    subprocess.run(["umount", "--lazy", str(disk)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_ends_the_run_in_one_line_and_resume_and_replay_are_exact(tmp_path, sglang_wheel_root,
                                                                             small_disk):
    env = campaign_env(tmp_path, unit_s=0.4)
    args = [*campaign_args(tmp_path, sglang_wheel_root, GOAL), "--runs-dir", str(small_disk / "runs")]
    proc = start_agent(*args, cwd=tmp_path, env=env)
    wait_for(lambda: list(small_disk.glob("runs/*/jobs/tune-gpu1/wrapper.json")), 120, "the tuning jobs to run")
    filler = _fill(small_disk)
    output, _ = proc.communicate(timeout=limit(240))
    run = only_run(small_disk)
    assert proc.returncode == 1, output
    assert "Traceback" not in output, output
    said = [line for line in output.splitlines() if "no space left" in line]
    assert len(said) == 1 and str(run) in said[0] and "free at least 1.0 MiB" in said[0], output
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "failed" and result["reason"] == "disk_full", result
    assert result["disk"]["needed_bytes"] == 1 << 20
    events = read_trace(run / "trace.jsonl").events  # whole: no event half-written
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "run_finished" and events[-1]["reason"] == "disk_full"

    refused = run_cli("resume", str(run), cwd=tmp_path, env=env)  # still full: refused, nothing written
    assert_refusal(refused, "no space left", run)
    assert read_trace(run / "trace.jsonl").events == events

    filler.unlink()
    for key in ("tune-gpu0", "tune-gpu1"):  # they may have failed on the full disk too; they end either way
        wait_for(lambda key=key: run_cli("jobs", str(run), "--json", cwd=tmp_path, env=env).stdout.count(
            '"status": "running"') == 0, 120, f"{key} to end")
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert sum(n > 1 for n in calls.values()) <= 2  # at most the unit each GPU was in when the disk filled
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()


def test_a_job_whose_folder_was_deleted_while_it_ran_is_found_and_never_started_twice(tmp_path, sglang_wheel_root):
    env = campaign_env(tmp_path, unit_s=1.0)
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, GOAL), cwd=tmp_path, env=env)
    wait_for(lambda: (tmp_path / "runs").exists() and list((tmp_path / "runs").glob("*/jobs/tune-gpu1/wrapper.json")),
             120, "the tuning jobs to run")
    # a job shows wrapper.json before its leader has read job.json; deleted in between, it would run
    # nothing at all. GPU 0's tuner has begun once it records a call.
    calls = tmp_path / "tune_calls.txt"
    wait_for(lambda: calls.exists() and any(line.split()[-1:] == ["0"] for line in calls.read_text().splitlines()),
             120, "GPU 0's tuner to begin")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=limit(10))
    run = only_run(tmp_path)
    group = json.loads((run / "jobs" / "tune-gpu0" / "wrapper.json").read_text())["child_pgid"]
    shutil.rmtree(run / "jobs" / "tune-gpu0")  # its tuner runs on, with no ledger left

    refused = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    summary = json.loads((run / "steps" / "tune_kernels.json").read_text())["summary"]
    assert "tune-gpu0" in summary and str(group) in summary and "not started a second time" in summary
    assert not (run / "jobs" / "tune-gpu0").exists()  # nothing launched for it
    wait_for(lambda: not processes_of_job(run / "jobs" / "tune-gpu0"), 240, "the orphaned tuner to end")

    done = run_cli("resume", str(run), cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.05))
    assert done.returncode == 0, done.stdout + done.stderr
    calls = Counter((tmp_path / "tune_calls.txt").read_text().splitlines())
    assert max(calls.values()) == 1  # every unit tuned once: the orphan's saved units were kept, none ran twice
