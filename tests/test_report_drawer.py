"""The report's plots drawn by the campaign's warm drawer (agent/report/drawer.py), a real child process:
the report takes its plots only when they are of the statistics the report computed, and draws them itself
when the drawer is gone or was handed other numbers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from agent.report import drawer
from agent.report.build import build_report
from agent.report.plots import PNG_META_KEY
from tools.measure.decision import bench_records
from tools.measure.verdict import point_stats

POINT = {"backend": "sglang", "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0, "median_tpot_ms": 10.0,
         "p99_tpot_ms": 14.0, "median_itl_ms": 9.0, "p99_itl_ms": 30.0, "output_throughput": 800.0, "completed": 64}


@pytest.fixture(autouse=True)
def no_drawer_left():
    yield
    drawer.plots_drawn_beside([], Path("/nonexistent"))  # waits for any handed drawer
    for warm in drawer._WARM:
        warm.kill()
        warm.wait()
    drawer._WARM.clear()


def _measured_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "bench").mkdir(parents=True)
    for variant, tpot in (("baseline", 10.0), ("mtp", 6.0)):
        lines = [json.dumps({**POINT, "tag": f"{variant}-c{c}", "max_concurrency": c, "median_tpot_ms": tpot * c})
                 for c in (1, 8)]
        (run / "bench" / f"{variant}.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _colours(png: Path) -> dict:
    return json.loads(Image.open(png).text[PNG_META_KEY])["colours"]


def _stamps(run: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (run / "plots").glob("*.png")}


def test_the_report_takes_the_plots_the_drawer_drew(tmp_path):
    run = _measured_run(tmp_path)
    drawer.warm_drawer()
    assert drawer.hand_measured_plots(run)
    [handed] = drawer._HANDED
    assert handed.drawer.wait() == 0  # the drawer drew and ended before the report begins
    drawn = _stamps(run)
    assert set(drawn) == {"tpot_vs_concurrency.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png"}
    build_report(run, draw_plots=drawer.plots_drawn_beside)
    assert _stamps(run) == drawn  # taken, not drawn again
    assert not drawer._HANDED
    for png in (run / "plots").glob("*.png"):
        assert set(_colours(png)) == {"baseline", "mtp"}
    page = (run / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3


def test_plots_of_other_numbers_are_drawn_by_the_report(tmp_path):
    run = _measured_run(tmp_path)
    records, _ = bench_records(run / "bench")
    only_baseline = [s for s in point_stats(records) if s.variant == "baseline"]
    drawer.warm_drawer()
    assert drawer.hand_plots(only_baseline, run / "plots")
    drawer._HANDED[0].drawer.wait()
    assert set(_colours(run / "plots" / "tpot_vs_concurrency.png")) == {"baseline"}
    build_report(run, draw_plots=drawer.plots_drawn_beside)
    assert set(_colours(run / "plots" / "tpot_vs_concurrency.png")) == {"baseline", "mtp"}
    assert not drawer._HANDED


def test_a_drawer_that_died_leaves_the_plots_to_the_report(tmp_path):
    run = _measured_run(tmp_path)
    drawer.warm_drawer()
    [warm] = drawer._WARM
    warm.kill()  # our own child
    warm.wait()
    drawer.hand_measured_plots(run)  # a broken pipe, or a handed request nobody answers
    build_report(run, draw_plots=drawer.plots_drawn_beside)
    assert set(_colours(run / "plots" / "tpot_vs_concurrency.png")) == {"baseline", "mtp"}
    assert not drawer._HANDED and not drawer._WARM


def test_without_a_drawer_nothing_is_handed(tmp_path):
    run = _measured_run(tmp_path)
    assert not drawer.hand_measured_plots(run)
    build_report(run, draw_plots=drawer.plots_drawn_beside)
    assert len(_stamps(run)) == 3


def test_a_drawer_started_in_another_folder_draws_where_the_run_is(tmp_path, monkeypatch):
    """A process may start the drawer in one working folder and build a report from another (a library
    caller, or the CLI run in-process by the tests): the drawer is handed absolute folders, and a hand-off
    for the same relative path in another folder is not taken."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    _measured_run(second)
    monkeypatch.chdir(first)
    drawer.warm_drawer()  # started in first/
    monkeypatch.chdir(second)
    relative = Path("run")
    assert drawer.hand_measured_plots(relative)
    drawer._HANDED[0].drawer.wait()
    assert len(_stamps(second / "run")) == 3 and not (first / "run").exists()
    paths = drawer.plots_drawn_beside(point_stats(bench_records(relative / "bench")[0]), relative / "plots")
    assert sorted(paths) == sorted(relative / "plots" / name for name in _stamps(second / "run"))

    _measured_run(first)
    drawer.warm_drawer()
    assert drawer.hand_measured_plots(relative)  # second/run
    monkeypatch.chdir(first)
    build_report(relative, draw_plots=drawer.plots_drawn_beside)  # first/run: the hand-off is not its
    assert len(_stamps(first / "run")) == 3 and (first / "run" / "report.html").exists()
