"""A decision a person can trust, through the real CLI on the doubles (tests/campaign_fixtures.py) with
SGLang's real bench client: a regression at the higher concurrency is in the verdict box and the console,
the report's one comparison table holds the verdict's numbers, a skipped GSM8K gate is named in plan,
console and verdict, ``report`` after the baseline file is gone gives no ratio, a collapsed drafter is
called out, a data-parallel-attention server's accept length is counted over every rank, and a resumed
sweep whose leftover server fails the identity check ends with a measured baseline."""
from __future__ import annotations

import json
import re
import signal

import pytest

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli, start_agent, wait_for
from tests.slowdown import limit

# Draft verification that grows with the batch (the double's cost model, tests/doubles/speculative_profile.py):
# at concurrency 1 the 3/1/4 drafter's 2.5 tokens per step pay, at 4 the verify pass costs more than they give.
COSTLY = {"DSV4_DOUBLE_DRAFT_COST": "0.3", "DSV4_DOUBLE_STEP_MS": "8"}


def _mtp_campaign(root, wheel, extra_env: dict, *args: str, concurrency: str = "1,4"):
    env = {**campaign_env(root, gpus=1), **extra_env}
    out = run_cli(*campaign_args(root, wheel, goal="enable MTP", concurrency=concurrency), "--mtp-variants", "1",
                  "--repeats", "2", *args, cwd=root, env=env)
    return only_run(root), out


@pytest.fixture(scope="module")
def regressed(tmp_path_factory, sglang_wheel_root):
    root = tmp_path_factory.mktemp("regressed")
    run, out = _mtp_campaign(root, sglang_wheel_root, COSTLY)
    return root, run, out


def _verdict_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("[control] verdict: "))


def test_a_regression_at_the_higher_concurrency_is_in_the_verdict_box_and_the_console(regressed):
    root, run, out = regressed
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    verdict = json.loads((run / "verdict.json").read_text())
    one, four = verdict["levels"]
    assert verdict["recommended"] == "mtp" and one["winner"] == "mtp" and one["tpot_ratio"]["high"] < 1
    assert four["winner"] == "baseline" and four["regression"] and four["deployed_ratio"]["low"] > 1
    assert re.match(r"mtp: 0\.\d\d× TPOT at c1, \d\.\d\d× \(measurably slower\) at c4: keep the baseline if you "
                    r"serve at c4$", verdict["headline"]), verdict["headline"]
    assert verdict["disagree"] and "the levels disagree and neither --target-concurrency nor an SLO" in verdict["reason"]
    callout = f"regression at concurrency 4: mtp is measurably slower than the baseline ({_ratio(four['deployed_ratio'])} TPOT)"
    assert verdict["callouts"] == [callout]
    line = _verdict_line(out.stdout)
    assert verdict["headline"] in line and f"WARNING: {callout}" in line
    box = (run / "report.md").read_text().split("## ")[1]  # the verdict opens the report
    assert box.startswith("Verdict") and f"WARNING: {callout}" in box and verdict["headline"] in box
    script = (run / "serve_recommended.sh").read_text()
    assert f"WARNING: {callout}" in script


def _ratio(r: dict) -> str:
    return f"{r['value']:.2f}× ({r['low']:.2f}–{r['high']:.2f})"


def _table(md: str, first_header: str) -> list[dict[str, str]]:
    lines = [line for line in md.splitlines() if line.startswith("| ")]  # the |---| rule is left out
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |") and "repeats" in line)
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(head):
            break
        rows.append(dict(zip(head, cells)))
    return rows


def test_the_reports_one_comparison_table_holds_the_verdicts_numbers(regressed):
    _, run, _ = regressed
    verdict = json.loads((run / "verdict.json").read_text())
    md = (run / "report.md").read_text()
    comparison = md[md.index("## Comparison"):]
    assert "Last repeat" not in comparison and "Medians of the repeats with their range" in comparison
    rows = {(r["variant"], int(r["concurrency"])): r for r in _table(comparison, "variant")}
    for level in verdict["levels"]:
        row = rows[("mtp", level["concurrency"])]
        assert row["TPOT p50 (× baseline)"] == _ratio(level["deployed_ratio"])
        assert row["TPOT p50 (× baseline)"] == _ratio(level["tpot_ratio"])  # one variant: it is each level's best
        ceiling = float(row["TPOT ceiling (1/accept, × baseline)"])  # beside the measured ratio
        assert ceiling == pytest.approx(1 / float(row["accept length (tok/step)"]), abs=0.01) and ceiling < 1
    assert rows[("baseline", 1)]["TPOT p50 (× baseline)"] == "-"
    assert comparison.count("| variant | concurrency | repeats |") == 1  # one comparison table


def test_a_skipped_gate_is_named_in_plan_console_and_verdict(regressed):
    _, run, out = regressed
    said = "GSM8K accuracy gate SKIPPED: offline (a local tokenizer is given"
    assert said in (run / "plan.md").read_text()
    assert f"[control] {said}" in out.stdout
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["accuracy"].startswith(said) and said in _verdict_line(out.stdout)
    assert said in (run / "report.md").read_text().split("## ")[1]  # in the verdict box


def test_report_after_the_baseline_file_is_removed_gives_no_ratio(regressed, tmp_path):
    root, run, _ = regressed
    copy = tmp_path / run.name
    import shutil

    shutil.copytree(run, copy, symlinks=True)
    (copy / "bench" / "baseline.jsonl").unlink()
    out = run_cli("report", str(copy), cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    md = (copy / "report.md").read_text()
    box = md.split("## ")[1]
    assert box.startswith("Verdict") and "No recommendation: no concurrency level has both a measured baseline" in box
    assert f"no verdict at concurrency 1: baseline not measured — `dsv4-agent resume {copy}`" in box
    assert "×" not in box.split("How the deployed")[0]  # no ratio in the headline
    rows = _table(md[md.index("## Comparison"):], "variant")
    assert rows and all(r["TPOT p50 (× baseline)"] == "-" for r in rows)


def test_a_collapsed_drafter_is_called_out_in_the_verdict_and_the_report(tmp_path, sglang_wheel_root):
    profile = {"DSV4_DOUBLE_SPEC_PROFILE": json.dumps({"3/1/4": {"accept": 1}})}
    run, out = _mtp_campaign(tmp_path, sglang_wheel_root, profile, concurrency="1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    verdict = json.loads((run / "verdict.json").read_text())
    check = next(c for c in verdict["accept_checks"] if c["variant"] == "mtp")
    assert check["status"] == "collapsed" and check["accept_length"] == pytest.approx(1.0)
    words = ("mtp: accept length 1.00 with 3 draft steps (at concurrency 1): the drafter is probably not loaded "
             "as intended")
    assert check["text"] == words and words in verdict["callouts"]
    assert f"WARNING: {words}" in _verdict_line(out.stdout)
    assert f"WARNING: {words}" in (run / "report.md").read_text().split("## ")[1]


def test_a_data_parallel_attention_servers_accept_length_counts_every_rank(tmp_path, sglang_wheel_root):
    """Rank 0 accepts nothing and rank 1 three tokens per step: reading the first rank alone would call the
    drafter collapsed; the point's own figure pools every request (the counters)."""
    env = {"DSV4_DOUBLE_DP_ACCEPT": "1,3"}
    run, out = _mtp_campaign(tmp_path, sglang_wheel_root, env, "--server-arg", "--dp-size 2",
                             "--server-arg", "--enable-dp-attention", concurrency="1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    snaps = [json.loads(line) for line in (run / "bench" / "snapshots" / "mtp.jsonl").read_text().splitlines()]
    after = snaps[-1]
    ranks = after["rank_accept_lengths"]  # each rank's own cumulative average, as SGLang's schedulers report them
    assert len(ranks) == 2 and ranks[0] == 1.0 and ranks[1] > 2.5 and after["avg_spec_accept_length"] is None
    points = {(p["variant"], p["concurrency"]): p for p in json.loads((run / "results.json").read_text())["points"]}
    accept = points[("mtp", 1)]["accept_length"]
    tokens = after["generation_tokens"] - snaps[-2]["generation_tokens"]
    verifies = after["verify_calls"] - snaps[-2]["verify_calls"]
    assert accept == pytest.approx(tokens / verifies) and 1.2 < accept < 2.0
    verdict = json.loads((run / "verdict.json").read_text())
    assert not [c for c in verdict["accept_checks"] if c["status"] == "collapsed"]


def test_a_resumed_sweep_replaces_a_leftover_server_that_fails_the_identity_check(tmp_path, sglang_wheel_root):
    hold = tmp_path / "hold-requests"
    hold.touch()  # the first point stays open until the agent has died inside it
    identity = tmp_path / "identity"
    env = {**campaign_env(tmp_path, gpus=1), "DSV4_DOUBLE_HOLD_FILE": str(hold),
           "DSV4_DOUBLE_IDENTITY_FILE": str(identity)}
    args = [*campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP", concurrency="1,2"), "--mtp-variants", "1"]
    proc = start_agent(*args, cwd=tmp_path, env=env)
    # the point's wrapper has started (a folder alone may precede the launch): from then on it runs detached
    run = wait_for(lambda: next(iter((tmp_path / "runs").glob("*/jobs/bench-baseline-c1/wrapper.json")), None)
                   and only_run(tmp_path), 120, "the baseline's first point to start")
    proc.send_signal(signal.SIGKILL)  # the agent alone dies; its server runs on
    proc.wait(timeout=limit(10))
    hold.unlink()
    wait_for(lambda: (run / "jobs" / "bench-baseline-c1" / "exit.json").exists(), 120, "the point to finish")
    identity.write_text("/models/another-model")  # the server left running now answers as another one

    out = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    assert any("failed the identity check" in str(e.get("message", "")) for e in events)
    assert (run / "jobs" / "serve-baseline-a2").exists()  # a fresh server in its place
    verdict = json.loads((run / "verdict.json").read_text())
    assert [lv["concurrency"] for lv in verdict["levels"]] == [1, 2]
    assert all(lv["baseline_measured"] and lv["tpot_ratio"] for lv in verdict["levels"])
