"""The decision, end to end through the real CLI on doubles (tests/campaign_fixtures.py): variants from
the evidence of an upstream-shaped checkout, repeats, SGLang's real GSM8K check against the server
double (one setting answers degraded), the verdict, serve_recommended.sh, results.csv/json, and the
report opened in headless Chromium at a phone's and a desktop's width: no sideways overflow, the verdict
in the first screen."""
from __future__ import annotations

import csv
import json
import subprocess

import pytest

from tests.campaign_fixtures import DOUBLES, MODEL, campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli
from tests.conftest import require_binary
from tests.decision_fixtures import upstream_checkout, write_gsm8k
from tests.doubles.tokenizer import build_tokenizer

VERDICT_BORDER = (0x3A, 0x7D, 0x44)  # the verdict box's border colour in report.html's style


@pytest.fixture(scope="module")
def decided(tmp_path_factory, sglang_wheel_root):
    root = tmp_path_factory.mktemp("decision")
    checkout = upstream_checkout(root / "sglang", sglang_wheel_root)
    tok = build_tokenizer(root / "tok")
    data = write_gsm8k(root / "gsm8k.jsonl")
    env = {**campaign_env(root, gpus=1), "DSV4_DOUBLE_GSM8K": str(data), "DSV4_DOUBLE_GSM8K_DEGRADED": "2/1/3"}
    out = run_cli("enable MTP", "--sglang", str(checkout), "--sglang-python", str(DOUBLES / "sglang_python"),
                  "--model", MODEL, "--model-path", str(tok), "--tokenizer", str(tok), "--concurrency", "1,4",
                  "--input-len", "8", "--output-len", "24", "--prompts-per-concurrency", "2", "--min-prompts", "4",
                  "--mtp-steps", "2", "--accuracy-data", str(data), "--accuracy-questions", "12", "--repeats", "2",
                  cwd=root, env=env)
    return root, out


def test_every_supported_setting_is_measured_with_its_evidence_and_repeats(decided):
    root, out = decided
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = only_run(root)
    plan = json.loads((run / "measure_plan.json").read_text())
    settings = {}
    for v in plan["variants"]:
        flags = {f["flag"]: f for f in v["flags"]}
        if flags:
            settings["/".join(flags[k]["value"] for k in ("--speculative-num-steps", "--speculative-eagle-topk",
                                                          "--speculative-num-draft-tokens"))] = v["name"]
            assert all(".py:" in f["source"] or f["source"] == "user choice" for f in v["flags"]), v["flags"]
    assert {"3/1/4", "1/1/2", "2/1/3"} <= set(settings), settings  # two from evidence, one from --mtp-steps
    b200 = next(v for v in plan["variants"] if v["name"] == settings["1/1/2"])
    assert any("test_deepseek_v4_flash_b200_balanced.py" in f["source"] for f in b200["flags"])
    assert plan["repeats"] == 2 and plan["client_module"] == "sglang.benchmark.serving"
    for v in plan["variants"]:
        tags = [json.loads(x)["tag"] for x in (run / "bench" / f"{v['name']}.jsonl").read_text().splitlines()]
        assert sorted(tags) == sorted(f"{v['name']}-c{c}{r}" for c in (1, 4) for r in ("", "-r2"))


def test_the_accuracy_gate_excludes_the_degraded_setting(decided):
    root, _ = decided
    run = only_run(root)
    acc = {p.stem: json.loads(p.read_text()) for p in (run / "bench" / "accuracy").glob("*.json")}
    degraded = next(n for n in acc if n.endswith("2-1-3"))
    assert acc["baseline"]["accuracy"] == 1.0 and acc[degraded]["accuracy"] == 0.5
    assert all(a["accuracy"] == 1.0 for n, a in acc.items() if n != degraded)
    verdict = json.loads((run / "verdict.json").read_text())
    assert list(verdict["excluded"]) == [degraded] and "below" in verdict["excluded"][degraded]
    assert verdict["recommended"] != degraded
    assert all(degraded not in (lv["tpot_winner"], lv["throughput_winner"]) for lv in verdict["levels"])


def test_the_verdict_follows_the_measurements_and_names_the_winner(decided):
    root, out = decided
    run = only_run(root)
    verdict = json.loads((run / "result.json").read_text())["verdict"]  # result.json carries it
    points = {(p["variant"], p["concurrency"]): p for p in json.loads((run / "results.json").read_text())["points"]}
    for level in verdict["levels"]:
        conc = level["concurrency"]
        eligible = {v: p["metrics"]["median_tpot_ms"]["median"] for (v, c), p in points.items()
                    if c == conc and v not in verdict["excluded"] and v != "baseline"}
        best = min(eligible, key=eligible.get)
        ratio = eligible[best] / points[("baseline", conc)]["metrics"]["median_tpot_ms"]["median"]
        assert abs(level["tpot_ratio"]["value"] - ratio) < 1e-9
        assert level["tpot_winner"] in (best, None)
    first = next(lv for lv in verdict["levels"] if lv["concurrency"] == 1)
    # the double decodes ~1.7-2.5 tokens per step at concurrency 1: MTP is measurably faster there
    assert first["tpot_winner"] is not None and first["tpot_ratio"]["high"] < 1 and first["accept_length"] > 1
    assert verdict["recommended"] in {v for v, _ in points} - {"baseline", *verdict["excluded"]}
    # each level names its winner and why; the rule across levels is written in the verdict
    assert first["winner"] == first["tpot_winner"] and first["why"].startswith("lowest TPOT, measurably")
    assert all(lv["winner"] and lv["why"] for lv in verdict["levels"])
    assert verdict["rule"].startswith("the variant that wins the most concurrency levels on TPOT")
    assert f"How the deployed setting is chosen across concurrencies: {verdict['rule']}" in (run / "report.md").read_text()
    script = (run / "serve_recommended.sh").read_text()
    assert "# why: RECOMMENDED by the measurement" in script and verdict["reason"][:60] in script
    assert "rule: the variant that wins the most concurrency levels" in script
    winner = json.loads((run / "measure_plan.json").read_text())
    winner = next(v for v in winner["variants"] if v["name"] == verdict["recommended"])
    assert all(f"args+=({f['flag']} {f['value']})" in script for f in winner["flags"])
    subprocess.run(["bash", "-n", str(run / "serve_recommended.sh")], check=True)
    printed = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith("[control] report: ")]
    assert [(root / p).resolve() for p in printed] == [(run / "report.html").resolve()]  # printed at the end
    rows = list(csv.DictReader((run / "results.csv").open()))
    assert len(rows) == 4 * 2 and {r["repeats"] for r in rows} == {"2"}
    assert len(json.loads((run / "results.json").read_text())["runs"]) == 4 * 2 * 2


def test_report_opens_with_the_verdict_then_the_header(decided):
    root, _ = decided
    run = only_run(root)
    page = (run / "report.html").read_text()
    order = [page.index(s) for s in ('id="verdict"', 'id="header"', 'id="all-metrics"', 'id="accuracy"',
                                     'id="evidence"', 'id="steps-section"', 'id="timeline"')]
    assert order == sorted(order)
    for name in ("model", "model path", "GPU", "TP", "SGLang", "lengths", "prompts", "date"):
        assert f"<dt>{name}</dt>" in page
    assert f"<dt>model</dt><dd>{MODEL}</dd>" in page and f"<dt>model path</dt><dd>{root / 'tok'}</dd>" in page
    md = (run / "report.md").read_text()
    for header in ("TTFT p50 (ms)", "TPOT p90 (ms)", "ITL p95 (ms)", "E2E p99 (ms)", "requests (req/s)",
                   "output (tok/s)", "accept length (tok/step)", "TPOT p50 (× baseline)"):
        assert f"| {header} |" in md, header
    assert "| FAIL |" in md and "test_deepseek_v4_flash_b200_balanced.py" in md
    assert page.count('src="data:image/png;base64,') == 5  # four plots and the timeline


def test_report_shows_the_constraints_on_the_chosen_settings_and_folds_the_rest(decided):
    root, _ = decided
    run = only_run(root)
    answer = json.loads((run / "mtp.json").read_text())
    page = (run / "report.html").read_text()
    evidence = page[page.index('id="evidence"'):page.index('id="steps-section"')]
    shown, folded = evidence.split("<details>")
    total = len(answer["constraints"])
    bearing = shown.split("Constraints on the recommended settings (")[1]
    count = int(bearing.split(" of ")[0])
    assert 0 < count < total and f" of {total} in scope)" in bearing
    assert bearing.count("<li>") == count and folded.count("<li>") == total - count


def test_one_colour_per_variant_in_every_plot(decided):
    from PIL import Image

    from agent.report.plots import PNG_META_KEY

    run = only_run(decided[0])
    drawn = [json.loads(Image.open(p).text[PNG_META_KEY])["colours"] for p in sorted((run / "plots").glob("*.png"))]
    assert len(drawn) == 4 and max(len(d) for d in drawn) >= 3
    colour: dict[str, str] = {}
    for plot in drawn:
        for variant, hex_colour in plot.items():
            assert colour.setdefault(variant, hex_colour) == hex_colour, variant
    assert len(set(colour.values())) == len(colour)  # and no two variants share one


def test_results_csv_keeps_four_significant_digits(decided):
    run = only_run(decided[0])
    measured = {(p["variant"], p["concurrency"]): p for p in json.loads((run / "results.json").read_text())["points"]}
    rows = list(csv.DictReader((run / "results.csv").open()))
    checked = 0
    for row in rows:
        point = measured[(row["variant"], int(row["concurrency"]))]
        for metric, spread in point["metrics"].items():
            if metric not in row:  # the CSV has the metrics of the report's table; results.json has all
                continue
            written = row[metric]
            assert float(written) == float(f"{float(written):.4g}"), (metric, written)  # no fifth digit
            assert float(written) == pytest.approx(spread["median"], rel=5e-4)
            checked += 1
    assert checked >= len(rows) * 19


@pytest.mark.parametrize("width,height", [(390, 844), (1280, 900)])
def test_report_reads_on_a_phone_and_a_desktop(decided, tmp_path, width, height):
    """In Chromium at a phone's and a desktop's viewport: nothing widens the page (wide tables scroll in their
    own box; a phone would otherwise zoom the page out), and the verdict's first line is in the first screen."""
    from PIL import Image

    from tests.chromium import measure

    run = only_run(decided[0])
    shot = tmp_path / "first-screen.png"
    seen = measure(run / "report.html", require_binary("chromium"), tmp_path / "profile", width, height, shot)
    assert seen["overflowing"] == [] and seen["scrollWidth"] <= seen["clientWidth"] <= width, seen
    assert seen["innerWidth"] == width and seen["innerHeight"] == height, seen  # not zoomed out to fit
    assert seen["verdictBeforeHeader"] and 0 <= seen["verdictTop"] < seen["verdictBottom"] <= height, seen
    pixels = set(Image.open(shot).convert("RGB").get_flattened_data())
    assert any(all(abs(p[i] - VERDICT_BORDER[i]) < 10 for i in range(3)) for p in pixels)  # the verdict box


@pytest.fixture(scope="module")
def unmet_slo(tmp_path_factory, sglang_wheel_root):
    """MTP made exactly as fast as the baseline (the double's profile), on a host whose speed jumps between
    two figures (the double's seeded noise: the repeats spread far more than this machine's own noise),
    and an SLO nobody meets."""
    root = tmp_path_factory.mktemp("slo")
    env = {**campaign_env(root, gpus=1), "DSV4_DOUBLE_SPEC_PROFILE": json.dumps({"3/1/4": {"accept": 1, "cost": 0}}),
           "DSV4_DOUBLE_NOISE": "0.4|2.5"}
    out = run_cli(*campaign_args(root, sglang_wheel_root, goal="enable MTP"), "--repeats", "3", "--concurrency", "1",
                  "--max-tpot-ms", "0.001", cwd=root, env=env)
    return root, out


def test_an_slo_no_variant_meets_is_a_verdict_not_an_error(unmet_slo):
    root, out = unmet_slo
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = only_run(root)
    verdict = json.loads((run / "result.json").read_text())["verdict"]
    assert verdict["recommended"] is None
    assert verdict["reason"].startswith("no variant meets TPOT p99 ≤ 0.001 ms at any concurrency measured")
    assert not (run / "serve_recommended.sh").exists()
    assert "No recommendation: no variant meets" in (run / "report.md").read_text()
    assert "[control] verdict: no recommendation" in out.stdout


def test_within_the_spread_is_no_measurable_difference(unmet_slo):
    root, _ = unmet_slo
    level = json.loads((only_run(root) / "verdict.json").read_text())["levels"][0]
    assert level["tpot_winner"] is None and level["summary"].startswith("no measurable difference on TPOT")
    assert level["tpot_ratio"]["low"] <= 1 <= level["tpot_ratio"]["high"]


def test_offline_without_data_the_gate_is_skipped_and_says_why(unmet_slo):
    root, _ = unmet_slo
    run = only_run(root)
    assert not (run / "bench" / "accuracy").exists() or not list((run / "bench" / "accuracy").glob("*.json"))
    md = (run / "report.md").read_text()
    assert "Accuracy gate skipped: offline" in md and "--accuracy-data FILE" in md
    assert "not checked" not in json.loads((run / "verdict.json").read_text())["excluded"]
