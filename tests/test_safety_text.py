"""Text is data (issue 13 item 5): a run folder path with a newline cannot add a line to a generated
script, an interpreter named like an option is refused (and every script runs it after ``exec --``),
and control characters from repositories, logs and run folders reach the terminal escaped."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from tests.cli_helpers import only_run, run_cli
from tests.messages import assert_refusal
from tests.slowdown import limit


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_a_newline_in_the_run_folder_path_runs_nothing_from_the_sbatch_script(tmp_path):
    marker = tmp_path / "injected"
    runs = tmp_path / f"runs\ntouch {marker}\n"
    out = run_cli("benchmark", "--nodes", "2", "--runs-dir", str(runs), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    run = next(p for p in runs.iterdir() if p.is_dir())
    sbatch = run / "multinode" / "baseline" / "serve-multinode.sbatch"
    fake = tmp_path / "slurm-bin"
    fake.mkdir()
    _stub(fake, "scontrol", 'echo node0')  # `scontrol show hostnames`
    _stub(fake, "srun", "exit 0")
    done = subprocess.run(["bash", str(sbatch)], capture_output=True, text=True, timeout=limit(30),
                          env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node0"})
    assert done.returncode == 0, done.stderr
    assert not marker.exists()  # the path's second line stayed inside its comment
    assert subprocess.run(["bash", "-n", str(sbatch)]).returncode == 0


def test_an_interpreter_named_like_an_option_is_refused(tmp_path):
    out = run_cli("enable MTP", "--sglang-python=-a", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert_refusal(out, "--sglang-python", "'-a'", "path")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def _crafted_run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "jobs" / "tune-gpu0").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune \x1b]0;owned\x07kernels", "settings": {}}))
    (run / "result.json").write_text(json.dumps({"status": "failed", "summary": "\x1b[2J\x1b[31mall is fine\u202e"}))
    job = {"key": "tune-gpu0", "argv": ["true"], "kind": "tune", "lane": "gpu", "gpus": [0], "intent_at": 0}
    (run / "jobs" / "tune-gpu0" / "job.json").write_text(json.dumps(job))
    (run / "jobs" / "tune-gpu0" / "log.txt").write_bytes(b"ok\n\x1b[1A\x1b[2Kerased line\r\n")
    return run


def test_control_characters_reach_the_terminal_escaped(tmp_path):
    run = _crafted_run(tmp_path)
    status = run_cli("status", str(run), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "\x1b" not in status.stdout and "\u202e" not in status.stdout and "\x07" not in status.stdout
    assert "\\x1b[2J" in status.stdout and "\\u202e" in status.stdout
    logs = run_cli("jobs", str(run), "--logs", "tune-gpu0", cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    assert "\x1b" not in logs.stdout and "\\x1b[1A" in logs.stdout and "erased line" in logs.stdout


def test_the_live_view_escapes_what_it_quotes(tmp_path):
    """A source path from the user's machine, quoted by preflight into the live view."""
    source = tmp_path / "sglang\x1b[31m"
    (source / "sglang").mkdir(parents=True)
    (source / "sglang" / "__init__.py").write_text("")
    out = run_cli("tune kernels", "--sglang", str(source), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert "\x1b" not in out.stdout and "sglang\\x1b[31m" in out.stdout, out.stdout
    assert only_run(tmp_path).exists()
