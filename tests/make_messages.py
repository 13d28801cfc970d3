"""Renders the refusals a person meets most into ``tests/fixtures/messages.txt``, the message snapshot.

    .venv/bin/python tests/make_messages.py      # regenerate it after rewording one of these messages

Each case runs the real CLI in a scratch folder of its own (``tests/cli_helpers.run_cli``) and keeps
its exit code and its one line on stderr, the scratch folder written as ``<tmp>``.
``tests/test_message_snapshot.py`` renders them again and compares: a reworded message shows up as
one reviewed diff of this file, while the tests elsewhere name only the facts in it
(``tests/messages.py``, docs/testing.md).
"""
from __future__ import annotations

import fcntl
import json
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).resolve().parent / "fixtures" / "messages.txt"
sys.path.insert(0, str(ROOT))

from tests.cli_helpers import run_cli  # noqa: E402 - after the path the script needs

RUN = "20260101T000000Z-enable-mtp"
NO_GPU = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi: nothing probes a GPU


def _run_folder(root: Path, settings: dict | None = None, status: str | None = None) -> Path:
    run = root / "runs" / RUN
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": settings or {}}))
    (run / "trace.jsonl").write_text("")
    if status:
        (run / "result.json").write_text(json.dumps({"status": status, "summary": "", "finished_at": 1.0}))
    return run


def _finished(root: Path, _held: ExitStack) -> list[str]:
    _run_folder(root, status="finished")
    return ["resume", RUN]


def _driven(root: Path, held: ExitStack) -> list[str]:
    """A run whose lock another process holds (as this one does, until the case is rendered)."""
    lock = held.enter_context(open(_run_folder(root, status="planned") / ".lock", "a+"))
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock.write("pid 4242")
    lock.flush()
    return ["resume", RUN]


def _recorded_host(root: Path, _held: ExitStack) -> list[str]:
    _run_folder(root, {"executor": "ssh://gpu-box.invalid"})
    return ["jobs", RUN]


def _config_not_allowed(root: Path, _held: ExitStack) -> list[str]:
    (root / "dsv4-agent.toml").write_text('runs-dir = "x"\n')
    return ["enable MTP"]


def _argv(*args: str) -> Callable[[Path, ExitStack], list[str]]:
    return lambda _root, _held: list(args)


CASES: dict[str, Callable[[Path, ExitStack], list[str]]] = {  # what sets the case up, and its command line
    "unknown command": _argv("stauts", "latest"),
    "unknown option": _argv("tune kernels", "--frobnicate"),
    "no such run": _argv("status", "ghost"),
    "no such run elsewhere": _argv("status", "ghost", "--runs-dir", "old runs"),
    "finished run": _finished,
    "run driven by another process": _driven,
    "host recorded by a run folder": _recorded_host,
    "working folder's config file not allowed": _config_not_allowed,
    "unknown executor": _argv("tune kernels", "--executor", "carrier-pigeon"),
    "bad GPU list": _argv("tune kernels", "--gpus", "zero"),
    "TP not dividing the GPUs": _argv("tune kernels", "--tp", "3"),
    "count past its limit": _argv("benchmark", "--repeats", "101"),
}


def render(scratch: Path) -> str:
    """Every case as ``<case> | exit <code> | <stderr>``, one line each, in CASES' order."""
    lines = []
    for name, setup in CASES.items():
        root = scratch / name.replace(" ", "-").replace("'", "")
        root.mkdir(parents=True)
        with ExitStack() as held:
            done = run_cli(*setup(root, held), cwd=root, env=NO_GPU)
        said = done.stderr.rstrip("\n").replace(str(scratch), "<tmp>")
        lines.append(f"{name} | exit {done.returncode} | {said}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as state:
        os.environ["DSV4_STATE_DIR"] = state  # folders allowed by this user are not the snapshot's (as in tests)
        SNAPSHOT.write_text(render(Path(scratch)))
    print(f"wrote {SNAPSHOT}")
