"""The decision's rules on their own: variants from real evidence (upstream-shaped checkout), the
hooks' check of --mtp-steps, the accuracy gate's interval, the verdict (spread, SLO, gate), and the
CLI's refusals of bad input before any run folder exists."""
from __future__ import annotations

import re

import pytest

from tests.cli_helpers import run_cli
from tests.decision_fixtures import upstream_checkout
from tests.messages import assert_refusal
from tools.base import ToolError
from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
from tools.measure.accuracy import AccuracyPlan, AccuracyResult, gate, wilson
from tools.measure.results import record_from_dict
from tools.mtp.variants import evidence_choices, user_choices
from tools.measure.verdict import Slo, decide, point_stats
from tools.mtp.infer import InferMtpArgs, infer_mtp


@pytest.fixture(scope="module")
def evidence(tmp_path_factory, sglang_wheel_root):
    checkout = upstream_checkout(tmp_path_factory.mktemp("up") / "sglang", sglang_wheel_root)
    answer = infer_mtp(InferMtpArgs(sglang=str(checkout), model="deepseek-ai/DeepSeek-V4-Flash"))
    rules = extract_constraints(ExtractConstraintsArgs(root=str(checkout),
                                                       package_dir=str(checkout / "python" / "sglang"))).rules
    return answer, rules


def test_upstream_evidence_gives_both_deepseek_v4_settings_each_cited(evidence):
    answer, rules = evidence
    choices, _notes = evidence_choices(answer, rules, "NVIDIA B200", 8)
    by_label = {c.label: c for c in choices}
    assert {"3/1/4", "1/1/2"} <= set(by_label)
    assert all(o.endswith(tuple("0123456789")) and ".py:" in o for c in choices for o in c.origins.values())
    assert "8-gpu-b200" in " ".join(by_label["1/1/2"].why)
    capped, notes = evidence_choices(answer, rules, "NVIDIA B200", 8, cap=1)
    assert len(capped) == 1 and "--mtp-variants 1: left out" in notes[-1]


def test_user_steps_get_the_topk1_rewrite_and_a_forbidden_one_cites_the_rule(evidence):
    answer, rules = evidence
    known, _ = evidence_choices(answer, rules)
    added = user_choices(["2", "4/1/9", "1"], answer, rules, known)  # 1 is 1/1/2: already measured
    assert [c.label for c in added] == ["2/1/3", "4/1/5"]
    assert any("set to 5 (= steps + 1)" in line and "speculative_hook.py:" in line for line in added[1].why)
    with pytest.raises(ToolError, match=r"--mtp-steps 2/4/8: .*topk .*must be 1.*deepseek_v4_hook\.py:\d+"):
        user_choices(["2/4/8"], answer, rules, known)
    with pytest.raises(ToolError, match="must be a step count >= 1"):
        user_choices(["0"], answer, rules, known)


def test_the_gate_is_the_baselines_95_percent_interval_or_a_tolerance():
    low, high = wilson(1.0, 12)
    assert 0.74 < low < 0.76 and high == 1.0  # sound at p = 1, where p ± z·se would be [1, 1]
    results = {"baseline": AccuracyResult(variant="baseline", accuracy=0.9, questions=100),
               "a": AccuracyResult(variant="a", accuracy=0.85, questions=100),
               "b": AccuracyResult(variant="b", accuracy=0.7, questions=100),
               "c": AccuracyResult(variant="c", questions=100, error="few_shot_gsm8k failed: exit 1")}
    gates = gate(results, AccuracyPlan(questions=100))
    assert (gates["a"].passed, gates["b"].passed, gates["c"].passed) == (True, False, False)
    assert "below" in gates["b"].reason and "failed" in gates["c"].reason
    assert not gate(results, AccuracyPlan(questions=100, tolerance=0.01))["a"].passed
    skipped = gate(results, AccuracyPlan(skip_reason="offline"))
    assert all(g.passed is None and "not checked: offline" in g.reason for g in skipped.values())


def _records(points: dict[tuple[str, int], list[float]], ttft: float = 50.0) -> list:
    out = []
    for (variant, conc), tpots in points.items():
        for repeat, tpot in enumerate(tpots, 1):
            out.append(record_from_dict({"tag": f"{variant}-c{conc}" + (f"-r{repeat}" if repeat > 1 else ""),
                                         "max_concurrency": conc, "median_tpot_ms": tpot, "p99_tpot_ms": tpot * 1.2,
                                         "p99_ttft_ms": ttft, "output_throughput": 1000 / tpot * conc}, variant))
    return out


def test_verdict_per_concurrency_with_spread_and_no_measurable_difference():
    records = _records({("baseline", 1): [10, 10.5, 9.8], ("fast", 1): [5, 5.2, 5.1], ("same", 1): [10.2, 9.9, 10.6],
                        ("baseline", 8): [20, 21, 19], ("fast", 8): [19.5, 21.5, 20], ("same", 8): [20.5, 19, 21]})
    verdict = decide(records, {})
    one, eight = verdict.levels
    assert one.tpot_winner == "fast" and one.tpot_ratio.high < 1 and "fast is fastest on TPOT" in one.summary
    assert eight.tpot_winner is None and eight.summary.startswith("no measurable difference on TPOT")
    assert verdict.recommended == "fast" and "1 of 2 levels" in verdict.reason
    assert (one.winner, eight.winner) == ("fast", "baseline")  # each level names its winner, and why
    assert one.why.startswith("lowest TPOT, measurably: 0.51× (")
    assert eight.why.startswith("no variant is measurably faster on TPOT (best: ") and "within the spread" in eight.why
    assert verdict.rule.startswith("the variant that wins the most concurrency levels on TPOT")
    assert "geometric-mean" in verdict.rule and verdict.target_concurrency is None
    flat = decide(_records({("baseline", 1): [10, 11, 9], ("same", 1): [10.5, 9.5, 10]}), {})
    assert flat.recommended == "baseline" and "no MTP variant is measurably faster" in flat.reason
    noisy = point_stats(_records({("baseline", 1): [10, 14, 9]}))[0]
    assert noisy.noisy == ["median_tpot_ms", "output_throughput"]


def test_a_tie_across_concurrencies_is_broken_by_the_stated_rule_and_a_target_level_decides():
    records = _records({("baseline", 1): [10, 10.2, 9.9], ("mtp", 1): [5, 5.1, 5.2], ("mtp-1-1-2", 1): [8, 8.1, 7.9],
                        ("baseline", 4): [20, 20.5, 19.8], ("mtp", 4): [18, 18.2, 17.9],
                        ("mtp-1-1-2", 4): [14, 14.1, 13.8]})
    verdict = decide(records, {})
    assert [lv.winner for lv in verdict.levels] == ["mtp", "mtp-1-1-2"]  # one level each
    # mtp: 0.51× at c1; mtp-1-1-2: 0.70× at c4; the lower geometric mean of the levels won breaks the tie
    assert verdict.recommended == "mtp"
    assert "tied on levels won with mtp-1-1-2, broken by the lower geometric-mean TPOT ratio" in verdict.reason
    assert "(mtp 0.51×, mtp-1-1-2 0.70×)" in verdict.reason
    at_four = decide(records, {}, target=4)
    assert at_four.recommended == "mtp-1-1-2" and at_four.target_concurrency == 4
    assert at_four.rule == "--target-concurrency 4: the winner at concurrency 4 is deployed"
    assert at_four.reason.startswith("at the target concurrency 4, mtp-1-1-2: lowest TPOT, measurably: 0.70×")
    gone = decide(records, {}, target=16)
    assert gone.recommended is None and "concurrency 16 (--target-concurrency) was not measured" in gone.reason


def test_one_sample_has_no_spread_and_is_not_called_measurable():
    verdict = decide(_records({("baseline", 1): [10], ("mtp", 1): [5]}), {})
    level = verdict.levels[0]
    assert level.tpot_winner is None and level.tpot_ratio.one_sample and level.tpot_ratio.text() == "0.50× (one sample)"
    assert level.summary.startswith("one sample: no spread, not called measurable (mtp 0.50× (one sample)")
    assert level.winner == "baseline" and level.why.startswith("one sample: no spread, not called measurable")
    assert verdict.recommended == "baseline" and verdict.reason.startswith("one sample per point: no spread")
    assert "--repeats 3" in verdict.reason
    mixed = decide(_records({("baseline", 1): [10, 10.1], ("mtp", 1): [5]}), {})  # one side has one sample
    assert mixed.levels[0].tpot_winner is None and mixed.levels[0].tpot_ratio.one_sample


def test_slo_picks_the_variant_meeting_it_at_the_highest_concurrency_and_the_gate_excludes():
    records = _records({("baseline", 1): [10] * 3, ("a", 1): [5] * 3, ("b", 1): [7] * 3,
                        ("baseline", 8): [20] * 3, ("a", 8): [30] * 3, ("b", 8): [14] * 3})
    slo = Slo(max_tpot_ms=20, percentile="p99")  # p99 TPOT = 1.2 x median in these records
    verdict = decide(records, {}, slo)
    assert verdict.recommended == "b" and "up to concurrency 8" in verdict.reason
    assert set(verdict.levels[0].meets_slo) == {"a", "b", "baseline"} and verdict.levels[1].meets_slo == ["b"]
    assert [lv.winner for lv in verdict.levels] == ["a", "b"]  # the most throughput among those meeting the SLO
    assert verdict.levels[1].why.startswith("meets TPOT p99 ≤ 20 ms with the most output throughput")
    assert verdict.rule.startswith("with an SLO (TPOT p99 ≤ 20 ms): the variant that meets it at the highest")
    from tools.measure.accuracy import GateResult

    gated = decide(records, {"b": GateResult(variant="b", passed=False, reason="accuracy 0.5 is below 0.76")}, slo)
    assert gated.recommended == "a" and gated.excluded == {"b": "accuracy 0.5 is below 0.76"}
    none = decide(records, {}, Slo(max_ttft_ms=1))
    assert none.recommended is None and none.reason.startswith("no variant meets TTFT p99 ≤ 1 ms")


@pytest.mark.parametrize("args, names", [
    (["--mtp-steps", "2/4/8"], ["--mtp-steps 2/4/8", "1", "deepseek_v4_hook.py"]),  # the rule SGLang's hook sets
    (["--mtp-steps", "two"], ["--mtp-steps", "'two'", "step count"]),
    (["--repeats", "0"], ["--repeats", "1"]),
    (["--slo-percentile", "p42"], ["--slo-percentile", "p99"]),
    (["--min-prompts", "0"], ["--min-prompts", "0"]),
    (["--concurrency", "1,8", "--target-concurrency", "4"], ["--target-concurrency 4", "--concurrency 1,8"]),
])
def test_bad_decision_options_are_refused_before_a_run_exists(tmp_path, args, names):
    out = run_cli("enable MTP", "--sglang-python", "python3", *args, cwd=tmp_path)  # refused before anything starts
    line = assert_refusal(out, *names)
    if args[0] == "--mtp-steps" and "/" in args[1]:
        assert re.search(r"deepseek_v4_hook\.py:\d+", line), line  # cited with its line
    runs = tmp_path / "runs"  # the hooks judge --mtp-steps after the GPU check, in a run folder then removed
    assert not runs.exists() or list(runs.iterdir()) == []


def test_no_verdict_without_a_baseline_and_no_recommendation_with_no_level_compared():
    records = _records({("baseline", 1): [10, 10.2, 9.9], ("mtp", 1): [5, 5.1, 5.2], ("mtp", 8): [9, 9.1, 9.2]})
    verdict = decide(records, {}, resume="dsv4-agent resume runs/x")
    one, eight = verdict.levels
    assert one.baseline_measured and one.winner == "mtp"
    assert not eight.baseline_measured and eight.winner is None and eight.tpot_ratio is None
    assert eight.why == "no verdict at concurrency 8: baseline not measured — `dsv4-agent resume runs/x`"
    assert verdict.recommended == "mtp" and "1 of 1 levels" in verdict.reason  # only compared levels count
    assert verdict.headline.endswith("; no verdict at c8 (baseline not measured)")
    alone = decide(_records({("mtp", 1): [5, 5.1], ("mtp-1-1-2", 1): [6, 6.1]}), {})
    assert alone.recommended is None and alone.reason.startswith("no concurrency level has both a measured baseline")
    assert alone.levels[0].why.startswith("no verdict at concurrency 1: baseline not measured — `dsv4-agent resume RUN`")
    assert decide(_records({("mtp", 1): [5, 5.1]}), {}, target=1).recommended is None


def test_the_headline_gives_the_deployed_settings_ratio_at_every_level_and_calls_out_the_regression():
    records = _records({("baseline", 1): [10, 10.5, 9.8], ("mtp-3-1-4", 1): [5.3, 5.2, 5.1],
                        ("baseline", 8): [20, 21, 19], ("mtp-3-1-4", 8): [19.5, 21.5, 20],
                        ("baseline", 16): [30, 31, 29], ("mtp-3-1-4", 16): [55, 54, 56]})
    verdict = decide(records, {})
    assert verdict.recommended == "mtp-3-1-4"
    assert verdict.headline == ("mtp-3-1-4: 0.52× TPOT at c1, 1.00× at c8, 1.83× (measurably slower) at c16: "
                                "keep the baseline if you serve at c ≥ 8")
    assert [lv.regression for lv in verdict.levels] == [False, False, True]
    assert [lv.best for lv in verdict.levels] == ["mtp-3-1-4"] * 3  # each level's own best, with its margin
    assert verdict.levels[2].tpot_ratio == verdict.levels[2].deployed_ratio
    assert verdict.disagree and "the levels disagree and neither --target-concurrency nor an SLO" in verdict.reason
    assert verdict.callouts == ["regression at concurrency 16: mtp-3-1-4 is measurably slower than the baseline "
                                "(1.83× (1.74–1.93) TPOT)"]
    at_one = decide(records, {}, target=1)  # the user said which level matters: no disagreement to report
    assert at_one.recommended == "mtp-3-1-4" and not at_one.disagree and at_one.callouts == verdict.callouts
    kept = decide(_records({("baseline", 1): [10, 11, 9], ("mtp", 1): [10.5, 9.5, 10]}), {})
    assert kept.headline == "keep the baseline (best variant per level: mtp 1.00× at c1)" and not kept.disagree


def test_each_point_has_its_ceiling_one_over_its_accept_length():
    raw = {"tag": "mtp-c1", "max_concurrency": 1, "median_tpot_ms": 5.0}
    record = record_from_dict(raw, "mtp")
    record.accept_length = 2.5
    point = point_stats([record])[0]
    assert point.tpot_ceiling == pytest.approx(0.4)
    assert point_stats(_records({("baseline", 1): [10]}))[0].tpot_ceiling is None
