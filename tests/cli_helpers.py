"""Run the real ``dsv4-agent`` console script as a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.slowdown import limit, wait_for  # noqa: F401 - wait_for: the tests' one way to wait

AGENT = str(Path(sys.executable).with_name("dsv4-agent"))


def agent(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The console script to its exit; ``timeout`` is a quiet machine's seconds (tests/slowdown.py)."""
    return subprocess.run([AGENT, *args], cwd=cwd, env=clean_env(env), capture_output=True, text=True,
                          timeout=limit(timeout))


def run_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process, for checks where a new interpreter adds nothing (usage errors,
    --json output): the same commands, exit codes and streams as ``agent()``, a second faster."""
    from typer.testing import CliRunner

    from agent.commands.cli import app

    kept = clean_env()
    leaked = {k: None for k in os.environ if k not in kept}  # the settings clean_env drops
    old = os.getcwd()
    os.chdir(cwd)
    try:
        done = CliRunner().invoke(app, list(args), env={**leaked, **(env or {})})
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(list(args), done.exit_code, done.stdout, done.stderr)


def only_run(cwd: Path) -> Path:
    runs = [p for p in (cwd / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def clean_env(extra: dict | None = None) -> dict:
    """This process's environment without settings that would leak into the agent under test."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DSV4_", "OPENAI_")) or k in ("DSV4_DOUBLE_REAL_PYTHON", "DSV4_STATE_DIR")}  # the tests' own
    env.update(extra or {})
    return env


def start_agent(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """The agent in the background (to be killed mid-run); its output is collected on exit."""
    return subprocess.Popen([AGENT, *args], cwd=cwd, env=clean_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
