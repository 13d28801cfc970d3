"""Smaller hand-off cases of issue 40: a bundle's output folder, a killed bundle's temporary file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

RUN_NAME = "20260101T000000Z-enable-mtp"


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
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stdout + out.stderr
        assert out.stderr.startswith(f"dsv4-agent: --output {given}: the folder ") and "does not exist" in out.stderr
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
