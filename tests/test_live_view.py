"""The live view: an overall clock, jobs while they run with elapsed, ETA and progress bars; plain
lines when not on a terminal; a campaign whose output pipe closes still finishes."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from agent.terminal.live import LiveView, clock
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
    assert lines[1].startswith("[gpu] progress: tune-gpu0 5/18 (28%, ETA ")  # the share done; a quarter crossed
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


def _measure_run(folder: Path) -> Path:
    """A run folder as the live view reads it: GPUs found, a benchmark planned for two variants at two levels."""
    folder.mkdir()
    (folder / "preflight.json").write_text(json.dumps({"gpus": [{"index": 0}, {"index": 1}]}))
    (folder / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": {"plan_only": False}}))
    (folder / "plan.json").write_text(json.dumps([{"kind": "infer_mtp"}, {"kind": "benchmark"}]))
    (folder / "measure_plan.json").write_text(json.dumps({
        "concurrency": [1, 2], "repeats": 1, "variants": [{"name": "baseline"}, {"name": "mtp"}],
        "accuracy": {"skip_reason": "offline"}}))
    return folder


def _sweep_events(t0: float) -> list[dict]:
    """The sweep's events for the baseline: its server boots in 10 s, its first point takes 4 s."""
    gpu = {"lane": "gpu"}
    return [{"type": "run_started", "lane": "control", "t": t0},
            {"type": "progress", **gpu, "kind": "bench", "variant": "baseline", "points": 2, "measured": 0,
             "message": "baseline: 2 of 2 points to measure", "t": t0},
            {"type": "job_launched", **gpu, "key": "serve-baseline", "kind": "serve", "variant": "baseline",
             "gpus": [0, 1], "t": t0},
            {"type": "progress", **gpu, "key": "serve-baseline", "ready": True, "variant": "baseline",
             "message": "baseline: server ready", "t": t0 + 10},
            {"type": "job_launched", **gpu, "key": "bench-baseline-c1", "kind": "bench", "variant": "baseline",
             "concurrency": 1, "repeat": 1, "gpus": [], "t": t0 + 10},
            {"type": "job_finished", **gpu, "key": "bench-baseline-c1", "kind": "bench", "variant": "baseline",
             "status": "succeeded", "t": t0 + 14}]


def test_bench_points_share_their_variants_row_and_the_campaign_has_an_eta(tmp_path):
    out = io.StringIO()
    view = LiveView(console=Console(file=out, force_terminal=True, width=160, color_system=None))
    view.run_path = _measure_run(tmp_path / "run")
    t0 = time.time() - 14
    events = _sweep_events(t0)
    for event in events[:-1]:
        view.on_event(event)
    view.console.print(view._render())
    assert "not timed yet: bench point" in out.getvalue()  # no point has finished: no rate for the rest
    view.on_event(events[-1])
    out.truncate(0)
    view.console.print(view._render())
    text = out.getvalue()
    # left: 1 baseline point (4 s) + the mtp server's boot (10 s) and its 2 points (8 s) = 22 s
    assert "ETA 00:22" in text and "not timed" not in text
    rows = [line for line in text.splitlines() if "bench" in line]
    assert len(rows) == 1 and "bench baseline" in rows[0] and "1/2" in rows[0] and " - " in rows[0]
    serve = next(line for line in text.splitlines() if "serve-baseline" in line)
    assert "0,1" in serve
    assert text.index("serve-baseline") < text.index("bench baseline")  # the points come under their server


def test_plain_lines_count_a_variants_points(capsys, tmp_path):
    view = LiveView(force_plain=True)
    for event in _sweep_events(time.time()):
        view.on_event(event)
    lines = capsys.readouterr().out.splitlines()
    assert "[gpu] job launched: serve-baseline on GPU 0,1" in lines
    assert "[gpu] progress: bench baseline 1/2 (50%, ETA 00:04)" in lines


def test_no_color_is_honoured(monkeypatch):
    """Colours on a colour terminal, none under NO_COLOR (https://no-color.org), the same view otherwise."""
    seen = {}
    for no_color in (None, "1"):
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("TERM", "xterm-256color")
        if no_color is None:
            monkeypatch.delenv("NO_COLOR", raising=False)
        else:
            monkeypatch.setenv("NO_COLOR", no_color)
        view = LiveView()
        view.console.file = io.StringIO()
        for event in _events(time.time() - 20):
            view.on_event(event)
        view.console.print(view._render())
        seen[no_color] = view.console.file.getvalue()
    colour = re.compile(r"\x1b\[[0-9;]*(?:3[0-8]|9[0-7]|4[0-8])(?:;[0-9;]*)?m")
    assert colour.search(seen[None]) and not colour.search(seen["1"])
    assert "tune-gpu0" in seen["1"] and "9/18" in seen["1"]


def test_the_live_views_last_screen_ends_with_the_verdict_and_the_report(tmp_path, sglang_wheel_root):
    """A measured campaign on doubles in a real terminal (tmux), under NO_COLOR: the live view's last
    table stays on screen with one row per variant's points, and the lines after it end with the
    verdict and the report's path; no colour anywhere."""
    import shlex

    from tests.campaign_fixtures import campaign_args, campaign_env
    from tests.conftest import require_binary
    from tests.slowdown import wait_for

    tmux = require_binary("tmux")
    env = clean_env({**campaign_env(tmp_path), "NO_COLOR": "1"})
    done = tmp_path / "exit-code"
    line = shlex.join([AGENT, *campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP", concurrency="1,2")])
    shell = f"{line}; echo $? > {shlex.quote(str(done))}; exec sleep 3600"  # the pane stays to be read
    sock = ["-S", str(tmp_path / "tmux.sock")]
    subprocess.run([tmux, *sock, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "50", "-c", str(tmp_path),
                    "env", *[f"{k}={v}" for k, v in env.items()], "bash", "--norc", "--noprofile", "-c", shell],
                   check=True, timeout=limit(60))
    try:
        wait_for(lambda: done.exists() and done.read_text().strip(), 300, "the campaign in tmux to end")
        pane = subprocess.run([tmux, *sock, "capture-pane", "-p", "-e", "-J", "-S", "-"], capture_output=True,
                              text=True, check=True, timeout=limit(60)).stdout
    finally:
        subprocess.run([tmux, *sock, "kill-server"], capture_output=True, timeout=limit(60))
    assert done.read_text().strip() == "0", pane
    lines = [line.rstrip() for line in pane.splitlines() if line.strip()]
    run = next((tmp_path / "runs").iterdir())
    assert lines[-2].startswith("[control] verdict: deploy "), lines[-6:]
    assert lines[-1] == f"[control] report: runs/{run.name}/report.html", lines[-6:]
    table = lines[:-2]
    assert any("bench baseline" in row and "2/2" in row for row in table)  # the last screen stayed
    assert not any("bench-baseline-c" in row for row in table if row.startswith("│"))  # one row per variant
    assert not re.search(r"\x1b\[[0-9;]*(?:3[0-8]|9[0-7]|4[0-8])(?:;[0-9;]*)?m", pane)  # NO_COLOR


_PROBE = ("import sys; from agent.terminal.live import LiveView; view = LiveView(); "
          "print(view.plain, 'rich.console' in sys.modules)")


def test_off_a_terminal_the_view_is_plain_and_rich_is_not_loaded():
    """A pipe (CI, scripts, the benchmarks) gets plain lines; rich would draw nothing there, so its import is
    not paid before the first GPU job."""
    env = {k: v for k, v in clean_env().items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=limit(120),
                         check=True)
    assert out.stdout.split() == ["True", "False"]


def test_a_pipe_that_rich_is_told_is_a_terminal_gets_the_live_view():
    """rich's own switches (FORCE_COLOR, TTY_COMPATIBLE) still turn the live view on where stdout is a pipe."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean_env(), name: "1"},
                             capture_output=True, text=True, timeout=limit(120), check=True)
        assert out.stdout.split() == ["False", "True"], name
