"""The live view: an overall clock, jobs while they run with elapsed, ETA and progress bars; plain
lines when not on a terminal; a campaign whose output pipe closes still finishes."""
from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path

from rich.console import Console

from agent.live import LiveView, clock
from tests.cli_helpers import AGENT, clean_env
from tests.slowdown import limit


def _events(t0: float) -> list[dict]:
    return [
        {"type": "run_started", "lane": "control", "t": t0},
        {"type": "job_launched", "lane": "gpu", "key": "tune-gpu0", "gpu": 0, "status": "running", "t": t0 + 1},
        {"type": "progress", "lane": "gpu", "key": "tune-gpu0", "gpu": 0, "done": 5, "total": 18,
         "message": "GPU 0: 5/18 units tuned", "t": t0 + 6},
        {"type": "progress", "lane": "gpu", "key": "tune-gpu0", "gpu": 0, "done": 9, "total": 18,
         "message": "GPU 0: 9/18 units tuned", "t": t0 + 10},
        {"type": "progress", "lane": "gpu", "key": "bench-mtp-c8", "message": "mtp: concurrency 8, 64 prompts",
         "t": t0 + 11},
    ]


def test_terminal_view_has_a_clock_bars_elapsed_and_eta():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    view = LiveView(console=console)
    t0 = time.time() - 20
    for event in _events(t0):
        view.on_event(event)
    console.print(view._render())
    text = out.getvalue()
    assert "campaign 00:2" in text                          # the overall clock, from run_started
    assert "tune-gpu0" in text and "9/18" in text and "━" in text  # a progress bar with its count
    row = next(line for line in text.splitlines() if "tune-gpu0" in line)
    elapsed, eta = [cell for cell in row.split() if cell[:2].isdigit() and ":" in cell]
    assert elapsed.startswith("00:1") and eta.startswith("00:")  # ~19 s so far; ~19 s more at 9 units per 19 s
    assert int(eta[-2:]) >= 15
    bench = next(line for line in text.splitlines() if "bench-mtp-c8" in line)
    assert "running" in bench                                # a benchmark point shown while it runs


def test_plain_lines_name_jobs_and_each_quarter_of_their_units(capsys):
    view = LiveView(force_plain=True)
    t0 = time.time()
    for event in _events(t0):
        view.on_event(event)
    view.on_event({"type": "job_finished", "lane": "gpu", "key": "tune-gpu0", "gpu": 0, "status": "succeeded",
                   "t": t0 + 21})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[gpu] job launched: tune-gpu0 on GPU 0 running"
    assert lines[1].startswith("[gpu] progress: tune-gpu0 5/18 (25%, ETA ")
    assert lines[2].startswith("[gpu] progress: tune-gpu0 9/18 (50%, ETA ")
    assert lines[-1] == "[gpu] job finished: tune-gpu0 on GPU 0 succeeded"
    assert clock(3725) == "1:02:05" and clock(65) == "01:05"


def test_a_campaign_piped_into_head_still_finishes(tmp_path: Path):
    piped = subprocess.run(f"set -o pipefail; {AGENT} 'enable MTP' | head -n 1; echo \"codes ${{PIPESTATUS[*]}}\"",
                           shell=True, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=limit(300),
                           executable="/bin/bash")
    first, codes = piped.stdout.splitlines()[0], piped.stdout.splitlines()[-1]
    assert first.startswith("[control] run folder:") and codes == "codes 0 0", piped.stdout + piped.stderr
    assert "Traceback" not in piped.stderr and "Broken pipe" not in piped.stderr
    run = next((tmp_path / "runs").iterdir())
    assert json.loads((run / "result.json").read_text())["status"] == "planned"
