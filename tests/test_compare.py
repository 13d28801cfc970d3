"""``dsv4-agent compare RUN_A RUN_B`` and ``report RUN --compare OTHER`` on two whole campaigns run on the
doubles (tests/campaign_fixtures.py): "before" measures baseline and mtp; "after" also measures a
setting of its own (--mtp-steps 2) with longer outputs. The figures compare reads back are checked
against each run's own results.json."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import run_cli
from tests.messages import assert_refusal

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "cli-json.schema.json").read_text())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, sglang_wheel_root):
    root = tmp_path_factory.mktemp("compare")
    env = campaign_env(root, gpus=1)
    runs = {}
    for name, more in (("before", []), ("after", ["--mtp-steps", "2", "--output-len", "24"])):
        done = run_cli(*campaign_args(root, sglang_wheel_root, goal="enable MTP"), "--repeats", "2", *more,
                       "--runs-dir", f"runs/{name}", cwd=root, env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr
        runs[name] = next((root / "runs" / name).iterdir())
    return root, runs["before"], runs["after"]


def _medians(run: Path) -> dict[tuple[str, int], dict]:
    return {(p["variant"], p["concurrency"]): p["metrics"] for p in json.loads((run / "results.json").read_text())["points"]}


def test_compare_sets_two_runs_side_by_side_in_text_and_json(two_runs):
    root, before, after = two_runs
    done = run_cli("compare", str(before), str(after), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, {**SCHEMA, "$ref": "#/$defs/compare"})
    assert (data["a"]["run"], data["b"]["run"]) == (str(before), str(after))
    changed = {s["setting"]: (s["a"], s["b"]) for s in data["settings"]}
    assert changed["mtp_steps"] == ([], ["2"]) and changed["output_len"] == (16, 24)
    assert "runs_dir" not in changed  # where a run lives is no difference between runs
    assert data["evidence"]["same"] and data["evidence"]["a"]["setting"] == "3/1/4"
    own = next(v for v in data["variants"] if v["variant"] not in ("baseline", "mtp"))
    assert own["a"] is None and own["b"] == "2/1/3"  # measured by "after" only
    a_points, b_points = _medians(before), _medians(after)
    for point in data["points"]:
        key = (point["variant"], point["concurrency"])
        ratio = point["b_over_a"]["tpot_ms"]
        if key not in a_points:
            assert point["a"] is None and ratio is None
            continue
        a, b = a_points[key]["median_tpot_ms"], b_points[key]["median_tpot_ms"]
        assert point["a"]["tpot_ms"] == a["median"] and point["b"]["tpot_ms"] == b["median"]
        assert ratio["value"] == pytest.approx(b["median"] / a["median"])
        assert (ratio["low"], ratio["high"]) == (pytest.approx(b["low"] / a["high"]), pytest.approx(b["high"] / a["low"]))
        assert point["a"]["repeats"] == point["b"]["repeats"] == 2 and not ratio["one_sample"]
    assert {(p["variant"], p["concurrency"]) for p in data["points"]} == set(a_points) | set(b_points)

    text = run_cli("compare", str(before), str(after), cwd=root)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"A: {before} (finished): enable MTP; SGLang ") and lines[1].startswith(f"B: {after}")
    assert "MTP evidence: the same recommendation (3/1/4)" in text.stdout
    assert any(line.split()[:3] == ["output_len", "16", "24"] for line in lines)
    mtp_row = next(line.split() for line in lines if line.split()[:2] == ["mtp", "1"])
    shown = next(p for p in data["points"] if (p["variant"], p["concurrency"]) == ("mtp", 1))
    assert f"{shown['b_over_a']['tpot_ms']['value']:.2f}×" in mtp_row  # the same ratio in both forms
    assert [own["variant"], "(variant)", "(not", "measured)", "2/1/3"] == \
        next(line.split() for line in lines if line.split()[:2] == [own["variant"], "(variant)"])
    assert "verdicts:" in text.stdout and f"B: deploy {data['b']['recommended']}" in text.stdout


def test_the_report_gets_a_compared_with_section(two_runs):
    root, before, after = two_runs
    done = run_cli("report", str(after), "--compare", str(before), cwd=root)
    assert done.returncode == 0, done.stderr
    page = (after / "report.html").read_text()
    assert 'id="compare"' in page and f"Compared with {before.name}" in page
    assert 'id="compare-points"' in page and 'id="compare-settings"' in page
    assert page.index('id="verdict"') < page.index('id="compare"')  # the verdict still comes first
    md = (after / "report.md").read_text()
    assert "Measured points" in md and "output_len" in md
    plain = run_cli("report", str(after), cwd=root)  # without --compare the section is gone again
    assert plain.returncode == 0 and 'id="compare"' not in (after / "report.html").read_text()


def test_compare_of_a_missing_run_is_a_usage_error(two_runs, tmp_path):
    root, before, _ = two_runs
    for args in (["compare", str(before), "ghost"], ["report", str(before), "--compare", "ghost"]):
        done = run_cli(*args, cwd=tmp_path)
        assert_refusal(done, "'ghost'", "`dsv4-agent runs`")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.no_replay("a copy of a run whose measure_plan.json is edited by hand")
def test_flags_that_differ_are_shown_with_the_evidence_each_run_cites(two_runs, tmp_path):
    _, before, _ = two_runs
    edited = tmp_path / "runs" / before.name
    shutil.copytree(before, edited)
    plan = json.loads((edited / "measure_plan.json").read_text())
    mtp = next(v for v in plan["variants"] if v["name"] == "mtp")
    steps = next(f for f in mtp["flags"] if f["flag"] == "--speculative-num-steps")
    was_source = steps["source"]
    steps.update(value="5", source="user choice")
    (edited / "measure_plan.json").write_text(json.dumps(plan))
    data = json.loads(run_cli("compare", str(before), str(edited), "--json", cwd=tmp_path).stdout)
    variant = next(v for v in data["variants"] if v["variant"] == "mtp")
    assert variant["flags"] == [{"flag": "--speculative-num-steps", "a": "3", "b": "5", "a_source": was_source,
                                 "b_source": "user choice"}]
    assert (variant["a"], variant["b"]) == ("3/1/4", "5/1/4")
    text = run_cli("compare", str(before), str(edited), cwd=tmp_path).stdout
    row = next(line.split() for line in text.splitlines() if line.split()[:2] == ["mtp", "--speculative-num-steps"])
    assert row[2:5] == ["3", "5", was_source.split()[0]]
