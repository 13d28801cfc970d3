"""A campaign works its MTP settings out once (tools/mtp/settings.py counts its calls into the file
DSV4_MTP_SETTINGS_CALLS names): with --mtp-steps up front, handed to the step; without, in the step
only; a resume whose infer_mtp outcome is recorded works nothing out again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

NO_GPU = {"PATH": "/usr/bin:/bin"}


@pytest.mark.parametrize("more", [["--mtp-steps", "2"], []], ids=["mtp-steps", "default"])
def test_the_mtp_settings_are_worked_out_once_per_campaign(tmp_path: Path, sglang_wheel_root: Path, more: list[str]):
    calls = tmp_path / "calls.txt"
    env = {**NO_GPU, "DSV4_MTP_SETTINGS_CALLS": str(calls)}
    out = run_cli("enable MTP", "--sglang", str(sglang_wheel_root), *more, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
    run = next((tmp_path / "runs").glob("*"))
    step = json.loads((run / "steps" / "infer_mtp.json").read_text())
    labels = [c["flags"].get("--speculative-num-steps") for c in step["data"]["settings"]["choices"]]
    assert ("2" in labels) == bool(more), labels  # the user's setting was judged in that one call
    plan = json.loads((run / "measure_plan.json").read_text())
    assert len(plan["variants"]) == 1 + len(labels)  # the plan measures what the step judged, nothing more
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    assert "infer_mtp: reusing recorded outcome" in (run / "trace.jsonl").read_text()
    assert len(calls.read_text().splitlines()) == 1, calls.read_text()
