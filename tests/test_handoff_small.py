"""Smaller hand-off cases of issue 40: a bundle's output folder, a killed bundle's temporary file."""
from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from tests.cli_helpers import agent, run_cli, wait_for
from tests.messages import assert_refusal

RUN_NAME = "20260101T000000Z-enable-mtp"


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` unwritable for the test's commands: a read-only bind mount of itself (root, which file
    modes do not stop), else its modes without write bits."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
            yield
        finally:
            subprocess.run(["umount", str(folder)], check=True)
        return
    modes = {path: path.stat().st_mode for path in [folder, *folder.rglob("*")]}
    for path, mode in modes.items():
        path.chmod(mode & ~0o222)
    try:
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def _fake_run(root: Path, name: str = RUN_NAME) -> Path:
    run = root / "runs" / name
    (run / "steps").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": {}}))
    (run / "plan.md").write_text("# plan\n")
    return run


@pytest.mark.no_replay("a hand-made run folder, bundled")
def test_a_bundle_into_a_folder_that_does_not_exist_is_refused(tmp_path):
    _fake_run(tmp_path)
    for output in (tmp_path / "nowhere" / "dir", tmp_path / "nowhere" / "file.tar.gz"):
        given = str(output) + ("/" if output.suffix != ".gz" else "")
        out = run_cli("bundle", RUN_NAME, "-o", given, cwd=tmp_path)
        assert_refusal(out, f"--output {given}", "does not exist")
        assert not (tmp_path / "nowhere").exists()


@pytest.mark.no_replay("a hand-made run folder, bundled")
def test_a_killed_bundles_temporary_file_is_removed_by_the_next(tmp_path):
    _fake_run(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".{RUN_NAME}.tar.gz.tmp{gone.stdout.strip()}"  # what a kill -9 mid-write leaves
    stale.write_bytes(b"\x1f\x8b half an archive")
    live = tmp_path / f".{RUN_NAME}.tar.gz.tmp1"  # pid 1 runs: a bundle being written now is left alone
    live.write_bytes(b"")
    made = run_cli("bundle", RUN_NAME, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / f"{RUN_NAME}.tar.gz").is_file() and not stale.exists() and live.exists()


def _finished(run: Path) -> Path:
    (run / "result.json").write_text(json.dumps({"status": "finished", "summary": "", "finished_at": 1.0}))
    return run


@pytest.mark.no_replay("hand-made run folders, listed and cleaned")
def test_a_fifo_lock_and_a_linked_run_folder_neither_hang_nor_break_runs(tmp_path):
    fifo_run = _finished(_fake_run(tmp_path))
    os.mkfifo(fifo_run / ".lock")
    outside = _finished(_fake_run(tmp_path / "elsewhere", "20260102T000000Z-enable-mtp"))
    (tmp_path / "runs" / outside.name).symlink_to(outside)
    listed = agent("runs", cwd=tmp_path, timeout=60)  # a real process: a hang is what this is about
    assert listed.returncode == 0 and fifo_run.name in listed.stdout, listed.stdout + listed.stderr
    cleaned = agent("runs", "--clean", "--older-than", "0s", cwd=tmp_path, timeout=60)
    assert cleaned.returncode == 0 and "Traceback" not in cleaned.stderr, cleaned.stdout + cleaned.stderr
    assert "a symbolic link (to " in cleaned.stdout and "cannot take its lock" in cleaned.stdout, cleaned.stdout
    assert fifo_run.is_dir() and outside.is_dir() and not (outside / ".lock").exists()
    planned = _fake_run(tmp_path, "20260104T000000Z-enable-mtp")
    (planned / "result.json").write_text(json.dumps({"status": "planned", "summary": "", "finished_at": 1.0}))
    os.mkfifo(planned / ".lock")
    resumed = agent("resume", planned.name, cwd=tmp_path, timeout=60)
    assert_refusal(resumed, f"{planned.name}/.lock", "not a regular file", "remove it")
    for made in (_finished(_fake_run(tmp_path, "20260103T000000Z-enable-mtp")),):
        again = agent("runs", "--clean", "--older-than", "0s", cwd=tmp_path, timeout=60)
        assert again.returncode == 0 and not made.exists(), again.stdout + again.stderr  # the others do not stop it


@pytest.mark.no_replay("a hand-made run folder, reported")
def test_a_remote_image_in_a_runs_notes_is_never_loaded_by_the_report(tmp_path):
    run = _fake_run(tmp_path)
    (run / "research_notes.md").write_text("# Research notes\n\n- see ![pixel](https://tracker.example/p.png?u=1)\n")
    out = run_cli("report", str(run), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    page = (run / "report.html").read_text()
    assert "image not shown: pixel &lt;https://tracker.example/p.png?u=1&gt;" in page
    assert "<img" not in page  # the run has no figures: the only image there was is the remote one
    assert "Content-Security-Policy" in page and "default-src 'none'; img-src data:" in page


URL_PASSWORD_REGEX = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*:)(?P<password>[^/\s@'\"]+)(?=@)")


def test_url_passwords_are_redacted_as_the_regular_expression_did():
    """The one-pass redaction (agent/secrets.py) gives what the regular expression it replaces gave, on
    every short text of URL-ish characters (short: the expression reads long ones again from each position)."""
    from agent.secrets import MARK, redact_text

    chars = "ab1+.-:/@ '\"\n"
    rng = random.Random(40)
    for _ in range(20000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 16)))
        expected = URL_PASSWORD_REGEX.sub(lambda m: m.group("head") + MARK, text)
        assert redact_text(text) == expected, text
    for text, expected in [("https://me:pw1@host/x", f"https://me:{MARK}@host/x"),
                           ("x://a:b://u:p@h", f"x://a:b://u:{MARK}@h"), ("9://u:p@h", "9://u:p@h"),
                           ("a://u:@h", "a://u:@h"), ("ssh://u:p/q@h", "ssh://u:p/q@h")]:
        assert redact_text(text) == expected, text


@pytest.mark.no_replay("a planned run whose goal is the redaction's crafted input")
def test_a_goal_of_130000_scheme_characters_is_redacted(tmp_path, sglang_wheel_root):
    """The crafted input of issue 40: a long run of scheme-like characters before a URL with a password."""
    goal = "tune kernels " + "ab-c.d+e" * 16200 + "://me:hunter22@example.org/x"
    out = run_cli(goal, "--model", "deepseek-ai/DeepSeek-V4-Flash", "--sglang", str(sglang_wheel_root),
                  "--shapes", "512,1024", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    run = next((tmp_path / "runs").iterdir())
    recorded = json.loads((run / "config.json").read_text())["goal"]
    assert recorded.endswith("e://me:[redacted]@example.org/x") and len(recorded) > 129000
    assert "hunter22" not in (run / "trace.jsonl").read_text() and "hunter22" not in out.stdout + out.stderr


@pytest.mark.no_replay("a hand-made run folder with a real job, copied")
def test_a_copy_of_a_live_run_folder_never_controls_the_originals_jobs(tmp_path):
    from tools.jobs.local import LocalExecutor
    from tools.jobs.spec import JobSpec

    original = _fake_run(tmp_path)
    (original / "result.json").write_text(json.dumps({"status": "interrupted", "summary": "", "finished_at": 1.0}))
    executor = LocalExecutor(original / "jobs")
    executor.launch(JobSpec(key="bench-x", argv=[sys.executable, "-c", "import time; time.sleep(600)"], kind="bench",
                            lane="gpu", gpus=[]))
    try:
        wait_for(lambda: executor.poll("bench-x").status == "running", 60, "the job to run")
        copy = tmp_path / "runs" / "20260105T000000Z-enable-mtp"
        shutil.copytree(original, copy)  # cp -r: the ledger, its token and pids travel with it
        listed = run_cli("jobs", str(copy), "--json", cwd=tmp_path)
        assert "runs for another run folder" in listed.stdout, listed.stdout + listed.stderr
        stopped = run_cli("jobs", str(copy), "--stop", "all", cwd=tmp_path)
        assert "a copy never controls the original's jobs" in stopped.stdout + stopped.stderr, stopped
        assert "Traceback" not in stopped.stderr
        assert executor.poll("bench-x").status == "running"  # the original's job was not signalled
        resumed = run_cli("resume", str(copy), cwd=tmp_path)
        assert_refusal(resumed, copy.name, "copy of a run", "jobs still run")
    finally:
        ended = executor.stop("bench-x")
    assert ended.status == "stopped", ended  # its own run folder still controls it


@pytest.mark.no_replay("a hand-made run folder with a link placed in it")
@pytest.mark.parametrize("command", [["report"], ["replay", "--timeline"], ["resume"]])
def test_no_command_writes_through_a_link_placed_in_a_run_folder(tmp_path, command):
    run = _fake_run(tmp_path)
    (run / "result.json").write_text(json.dumps({"status": "planned", "summary": "", "finished_at": 1.0}))
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    for name in ("report.html", "trace.jsonl", "timeline.png"):
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(victim)
    out = run_cli(command[0], str(run), *command[1:], cwd=tmp_path)
    assert_refusal(out, "symbolic link", victim, "nothing was written", code=(ExitCode.FAILED, ExitCode.USAGE))
    assert victim.read_text() == "the user's own file\n"


@pytest.mark.no_replay("a hand-made run folder on a read-only file system")
@pytest.mark.parametrize("command", [["report"], ["resume"], ["runs", "--clean", "--older-than", "0s", "--runs-dir"]])
def test_a_read_only_run_folder_answers_in_one_line(tmp_path, command):
    run = _fake_run(tmp_path)
    (run / "result.json").write_text(json.dumps({"status": "planned", "summary": "", "finished_at": 1.0}))
    with read_only(run.parent if command[0] == "runs" else run):
        out = run_cli(*command, str(run.parent if command[0] == "runs" else run), cwd=tmp_path)
    if command[0] == "runs":  # the run is kept, and said why
        assert out.returncode == 0 and "cannot take its lock" in out.stdout, out.stdout + out.stderr
        return
    line = assert_refusal(out, code=(ExitCode.FAILED, ExitCode.USAGE))
    assert "Read-only file system" in line or "Permission denied" in line


def _variants(trace: bytes) -> list[bytes]:
    """A recorded trace and what crashes, disks and people leave of it."""
    lines = trace.splitlines(keepends=True)
    cuts = [trace[:n] for n in range(0, len(trace), max(1, len(trace) // 37))]
    middle = len(lines) // 2
    return [trace, *cuts, b"".join(lines[:middle] + [b"not json\n"] + lines[middle:]),
            b"".join(lines[:middle] + lines[middle + 1:]), b"".join(lines[:middle] + [lines[middle]] + lines[middle:]),
            trace + b'{"v": 999, "seq": 0, "type": "x"}\n', trace + b"\xff\xfe\n", b"\n\n", b"[]\n" + trace]


def test_status_counts_a_trace_line_by_line_as_the_whole_reader_does(tmp_path):
    """``status`` streams the trace (agent/run/trace_read.py count_events): the same count, warning and refusal
    as reading it whole, on a recorded trace and every damaged form of it tried."""
    from agent.run.trace_read import TraceError, count_events, read_trace

    recorded = next(Path(__file__).parent.glob("golden/*/trace.jsonl")).read_bytes()
    path = tmp_path / "trace.jsonl"
    for variant in _variants(recorded):
        path.write_bytes(variant)
        try:
            whole = read_trace(path, schema=False)
            expected: tuple = (len(whole.events), whole.warning or None)
        except TraceError as err:
            expected = ("refused", str(err))
        try:
            counted = count_events(path)
            got: tuple = (counted.events, counted.warning)
        except TraceError as err:
            got = ("refused", str(err))
        assert got == expected, variant[-200:]


@pytest.mark.no_replay("a hand-made run folder with a FIFO placed in it")
def test_a_fifo_anywhere_in_a_run_folder_hangs_no_command(tmp_path):
    run = _fake_run(tmp_path)
    (run / "result.json").write_text(json.dumps({"status": "planned", "summary": "", "finished_at": 1.0}))
    os.mkfifo(run / "steps" / "benchmark.json")  # a reader of it would wait for a writer forever
    for command in (["status"], ["report"], ["jobs"], ["replay"], ["resume"], ["bundle"], ["compare", str(run)]):
        out = agent(command[0], str(run), *command[1:], cwd=tmp_path, timeout=60)  # a real process: a hang
        assert_refusal(out, "steps/benchmark.json", "not a regular file", "FIFO")
