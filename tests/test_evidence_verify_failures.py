"""``mtp --verify`` when SGLang's interpreter cannot do its part: it hangs (and has started a child of its
own), it is not executable, it is not there. Each ends with exit 1 and one line on stderr naming the
problem, the static answer still printed with ``--json``, and nothing of the interpreter left running.
The interpreter here is a double: a shell script named as the stand-in it is."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agent.exit_codes import ExitCode
from tests.messages import assert_refusal
from tests.own_processes import group_members_since
from tests.slowdown import limit

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "checkout"
CONFIG = Path(__file__).parent / "fixtures" / "verify" / "deepseek_v4_config.json"
REPO = Path(__file__).resolve().parents[1]
MODEL = "acme/Moe-Mtp-7B"


def _cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "dsv4-agent"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=limit(timeout), env=env)


def _checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG.read_text())
    return folder


def _hanging_interpreter(tmp_path: Path) -> Path:
    """Stand-in for --sglang-python that starts a child, records both pids, and never answers."""
    double = tmp_path / "hanging-sglang-python"
    double.write_text("#!/bin/sh\n"
                      f"echo $$ $(cut -d' ' -f22 /proc/$$/stat) > '{tmp_path}/leader.pid'\n"
                      "sleep 1000 &\n"
                      f"echo $! > '{tmp_path}/child.pid'\n"
                      "wait\n")
    double.chmod(0o755)
    return double


def _leader(tmp_path: Path) -> tuple[int, str]:
    """The double's pid (its group's id) and start time, as it wrote them."""
    pid, start = (tmp_path / "leader.pid").read_text().split()
    return int(pid), start


def _alive_in_group(tmp_path: Path) -> list[int]:
    """What still runs of the double's group (never another group that reused its number)."""
    return group_members_since(*_leader(tmp_path))


def _kill_what_is_left(tmp_path: Path) -> None:
    """A failure must not leave our double running; only its own processes are signalled."""
    if (tmp_path / "leader.pid").exists():
        for pid in _alive_in_group(tmp_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_hanging_interpreter_is_killed_with_its_children_and_the_run_exits_1(tmp_path):
    python = _hanging_interpreter(tmp_path)
    try:
        # the 60 s bound (scaled) is a guard against the default 600 s wait: --verify-timeout 5 must be what ends it
        done = _cli("mtp", "--sglang", str(FIXTURE), "--model", MODEL, "--model-path", str(_checkpoint(tmp_path)),
                    "--sglang-python", str(python), "--verify", "--verify-timeout", "5", "--json", timeout=60)
        assert (tmp_path / "child.pid").exists()  # the double did start its child before it was killed
        assert _alive_in_group(tmp_path) == [], "the interpreter's group outlived the timeout"
    finally:
        _kill_what_is_left(tmp_path)
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)  # the static answer is still there
    assert answer["recommended"]["flags"]["--speculative-algorithm"] == "EAGLE"
    assert answer["verification"]["status"] == "not_verified"
    assert "did not finish within 5 s" in answer["verification"]["reason"]
    assert_refusal(done, "--verify", "could not run", "--verify-timeout", code=ExitCode.FAILED)


def test_the_source_lookup_through_a_hanging_interpreter_is_bounded_too(tmp_path, sglang_wheel_root):
    """No --sglang: the hanging interpreter is first asked where sglang is; that ask is cut short,
    said in the answer, and the wheel is read instead."""
    python = _hanging_interpreter(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_SRC"}
    try:
        done = _cli("mtp", "--model", "deepseek-ai/DeepSeek-V4-Flash", "--sglang-python", str(python),
                    "--model-path", str(_checkpoint(tmp_path)), "--verify", "--verify-timeout", "3", "--json",
                    timeout=60, env=env)
        assert _alive_in_group(tmp_path) == []  # the later (verify) run's double
    finally:
        _kill_what_is_left(tmp_path)
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["source"]["kind"] == "wheel"
    assert any("did not say where sglang is within 3 s" in u for u in answer["unknowns"]), answer["unknowns"]


def test_an_interpreter_that_is_not_executable_is_called_so(tmp_path):
    python = tmp_path / "sglang-python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o644)
    checkpoint = _checkpoint(tmp_path)
    done = _cli("mtp", "--sglang", str(FIXTURE), "--model", MODEL, "--model-path", str(checkpoint),
                "--sglang-python", str(python), "--verify", "--json")
    assert done.returncode == 1
    reason = json.loads(done.stdout)["verification"]["reason"]
    assert "is not executable" in reason and "not found" not in reason and "chmod +x" in reason
    missing = _cli("mtp", "--sglang", str(FIXTURE), "--model", MODEL, "--model-path", str(checkpoint),
                   "--sglang-python", str(tmp_path / "nope" / "python"), "--verify", "--json")
    assert_refusal(missing, tmp_path / "nope" / "python", "not found", code=ExitCode.FAILED)


def test_bad_verify_timeouts_are_refused(tmp_path):
    for value in ("0", "-1", "abc", "99999"):
        done = _cli("mtp", "--sglang", str(FIXTURE), "--model", MODEL, "--verify", "--verify-timeout", value)
        assert_refusal(done, "--verify-timeout", quiet=True)
