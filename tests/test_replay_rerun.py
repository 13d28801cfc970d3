"""--rerun: the recorded plan runs again for real into a new folder; the diff names what changed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent.replay.rerun import diff_runs, flatten
from agent.steps.base import StepOutcome
from tests.cli_helpers import run_cli

GOLDEN = Path(__file__).parent / "golden"


def test_flatten_and_diff_name_keys(tmp_path):
    assert flatten({"a": {"b": [1, {"c": 2}]}}) == {"a.b[0]": 1, "a.b[1].c": 2}
    old, new = tmp_path / "old", tmp_path / "new"
    for run, shapes in ((old, ["7168,2048"]), (new, ["7168,2048", "4096,7168"])):
        (run / "steps").mkdir(parents=True)
        outcome = StepOutcome(kind="tune_kernels", status="done", summary="", data={"shapes": shapes})
        (run / "steps" / "tune_kernels.json").write_text(outcome.model_dump_json())
    text = diff_runs(old, new)
    assert "tuned shapes: 1 changed" in text
    assert '+ tune_kernels.shapes[1]: "4096,7168" (new)' in text
    assert "evidence and recommended flags: no change" in text


def test_rerun_golden_into_new_folder_and_diff(tmp_path):
    recorded = tmp_path / "recorded"
    shutil.copytree(GOLDEN / "playbook-mtp-tune", recorded)
    mtp = json.loads((recorded / "mtp.json").read_text())
    mtp["edited_by_test"] = "old recommendation"  # the recording now differs from what the campaign makes
    (recorded / "mtp.json").write_text(json.dumps(mtp))
    runs = tmp_path / "runs"
    done = run_cli("replay", str(recorded), "--rerun", "--raw", "--runs-dir", str(runs), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    new_runs = [p for p in runs.iterdir() if (p / "result.json").exists()]
    assert len(new_runs) == 1
    assert f"re-run of recorded → {new_runs[0]}" in done.stdout
    assert "evidence and recommended flags: 1 changed" in done.stdout
    assert '- files.mtp.json.edited_by_test: "old recommendation" (gone)' in done.stdout
    assert "tuned shapes:" in done.stdout and "benchmark figures:" in done.stdout
    assert done.stdout.index("re-run summary:") < done.stdout.index("evidence and recommended flags:")
    assert json.loads((new_runs[0] / "config.json").read_text())["goal"] == "enable MTP and tune kernels"


def _bench(run: Path, variant: str, rows: list[tuple[int, int, float, float]]) -> None:
    """bench_serving-shaped lines: (concurrency, repeat, median TPOT ms, output throughput)."""
    (run / "bench").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"max_concurrency": c, "tag": f"{variant}-c{c}" + (f"-r{r}" if r > 1 else ""),
                         "median_tpot_ms": tpot, "output_throughput": tput, "completed": 4})
             for c, r, tpot, tput in rows]
    (run / "bench" / f"{variant}.jsonl").write_text("\n".join(lines) + "\n")


def test_summary_says_per_metric_whether_a_change_is_noise(tmp_path):
    from agent.replay.rerun_summary import summarize

    old, new = tmp_path / "old", tmp_path / "new"
    _bench(old, "mtp", [(1, 1, 10.0, 100.0), (1, 2, 12.0, 101.0), (8, 1, 20.0, 400.0)])
    _bench(new, "mtp", [(1, 1, 12.5, 100.5), (1, 2, 12.5, 101.0), (8, 1, 20.4, 520.0)])
    summary = summarize(old, new, tolerance_pct=5.0)
    by = {(m.point, m.metric): m for m in summary.metrics}
    tpot1 = by[("mtp c1", "median_tpot_ms")]
    assert (tpot1.old, tpot1.new) == (11.0, 12.5) and round(tpot1.change_pct, 1) == 13.6
    assert tpot1.within_noise  # the old repeats alone spread 18 %: a 14 % move is inside that
    assert by[("mtp c8", "median_tpot_ms")].within_noise  # +2 % < 5 %
    thr8 = by[("mtp c8", "output_throughput")]
    assert not thr8.within_noise and round(thr8.change_pct) == 30
    text = summary.render()
    assert "1 outside noise" in text and "CHANGED (noise ±5.0%)" in text and "+30.0%" in text
    assert not summarize(old, new, tolerance_pct=40.0).render().count("CHANGED")  # --tolerance widens the band


def test_a_repeat_measured_twice_counts_once_as_in_the_verdict(tmp_path):
    """A point re-measured (a resumed benchmark) is figured as the verdict figures it: its last measurement."""
    from agent.replay.rerun_summary import summarize

    old, new = tmp_path / "old", tmp_path / "new"
    _bench(old, "mtp", [(1, 1, 10.0, 100.0), (1, 1, 14.0, 100.0)])
    _bench(new, "mtp", [(1, 1, 14.0, 100.0)])
    tpot = next(m for m in summarize(old, new).metrics if m.metric == "median_tpot_ms")
    assert (tpot.old, tpot.new, tpot.change_pct, tpot.noise_pct) == (14.0, 14.0, 0.0, 5.0)


def test_rerun_of_a_measured_campaign_prints_the_summary_first(tmp_path, sglang_wheel_root):
    from tests.campaign_fixtures import campaign_args, campaign_env
    from tests.cli_helpers import only_run, run_cli

    env = campaign_env(tmp_path)
    first = run_cli(*campaign_args(tmp_path, sglang_wheel_root, "enable MTP"), cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    run = only_run(tmp_path)
    again = run_cli("replay", str(run), "--rerun", "--runs-dir", str(tmp_path / "again"), cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    summary = again.stdout[again.stdout.index("re-run summary:"):]
    assert "mtp c1" in summary and "median_tpot_ms" in summary and "accept_length" in summary
    assert "recommended flags: unchanged" in summary and "tuned shapes: unchanged" in summary
    assert "field(s) differ (--raw shows them)" in summary and "benchmark figures:" not in summary
    new = next(p for p in (tmp_path / "again").iterdir() if (p / "result.json").exists())
    _figures_are_the_verdicts(run, new)


def _figures_are_the_verdicts(old: Path, new: Path) -> None:
    """The summary's figure and noise band of each point are the verdict's (point_stats), for both runs."""
    from agent.replay.rerun_summary import DEFAULT_TOLERANCE_PCT, summarize
    from tools.measure.decision import bench_records
    from tools.measure.verdict import point_stats

    stats = [{(s.variant, s.concurrency): s for s in point_stats(bench_records(run / "bench")[0])} for run in (old, new)]
    changes = summarize(old, new).metrics
    assert changes and {m.point for m in changes} == {f"{v} c{c}" for v, c in stats[0]} | {f"{v} c{c}" for v, c in stats[1]}
    for m in changes:
        variant, concurrency = m.point.rsplit(" c", 1)
        points = [side.get((variant, int(concurrency))) for side in stats]
        spreads = [(p.accept_spread if m.metric == "accept_length" else p.metrics.get(m.metric)) if p else None
                   for p in points]
        assert (m.old, m.new) == tuple(s.median if s else None for s in spreads), m
        if m.metric == "accept_length":
            assert (m.old, m.new) == tuple(p.accept_length if p else None for p in points), m
        assert m.noise_pct == max([DEFAULT_TOLERANCE_PCT] + [s.relative * 100 for s in spreads if s]), m
