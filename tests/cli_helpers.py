"""Run the real ``dsv4-agent`` console script as a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENT = str(Path(sys.executable).with_name("dsv4-agent"))


def agent(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV4_", "OPENAI_"))}
    full_env.update(env or {})
    return subprocess.run([AGENT, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def only_run(cwd: Path) -> Path:
    runs = [p for p in (cwd / "runs").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
