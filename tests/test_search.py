"""The measured search under --budget, through the real CLI on the doubles: the fenced space in plan.md, the
first look, the drops and the extra repeats as trace events, the same pick as a full measurement of the whole
space at no more than half its points; and the bad input (--budget 0, negative, below one server start;
--mtp-steps outside the space).

The space: the decision tests' checkout (recipes 3/1/4 and 1/1/2) with a recipe drafting 5 steps laid over it
(tests/fixtures/search), so step counts 1..5 at topk 1. The server double (tests/doubles/speculative_profile.py)
serves every setting by its model; 5/1/6 is given an accept length of 5 at little verify cost
(DSV4_DOUBLE_SPEC_PROFILE), so one setting is clearly best at every concurrency, as a search needs to save."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter

import pytest

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run

from tests import shared_trees
from tests.campaign_fixtures import DOUBLES, MODEL, campaign_env
from tests.cli_helpers import clean_env, only_run, run_cli
from tests.decision_fixtures import HERE, upstream_checkout
from tests.doubles.tokenizer import build_tokenizer
from tests.messages import assert_refusal
from tests.slowdown import limit

PROFILE = json.dumps({"5/1/6": {"accept": 5, "cost": 0.02}})
REPEATS = 4


def _args(checkout, tok, *extra: str) -> list[str]:
    return ["enable MTP", "--sglang", str(checkout), "--sglang-python", str(DOUBLES / "sglang_python"),
            "--model", MODEL, "--model-path", str(tok), "--tokenizer", str(tok), "--concurrency", "1,4",
            "--input-len", "8", "--output-len", "24", "--prompts-per-concurrency", "2", "--min-prompts", "4",
            "--repeats", str(REPEATS), *extra]


@pytest.fixture(scope="module")
def world(tmp_path_factory, sglang_wheel_root):
    root = tmp_path_factory.mktemp("search")
    checkout = upstream_checkout(root / "sglang", sglang_wheel_root)
    shared_trees.copy_over(HERE / "fixtures" / "search" / "test", checkout / "test")
    tok = build_tokenizer(root / "tok")
    env = {**campaign_env(root, gpus=1), "DSV4_DOUBLE_SPEC_PROFILE": PROFILE, "DSV4_DOUBLE_STEP_MS": "4"}
    return root, checkout, tok, env


@pytest.fixture(scope="module")
def searched(world):
    root, checkout, tok, env = world
    folder = root / "searched"
    folder.mkdir()
    out = run_cli(*_args(checkout, tok, "--budget", "30m"), cwd=folder, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return only_run(folder), out


def _runs(run) -> dict[str, list[str]]:
    return {p.stem: [json.loads(x)["tag"] for x in p.read_text().splitlines()]
            for p in (run / "bench").glob("*.jsonl") if not p.name.endswith(".failures.jsonl")}


def _events(run, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run / "trace.jsonl").read_text().splitlines()) if e["type"] == kind]


def test_plan_md_shows_the_fenced_space_with_why_each_point_is_allowed(searched):
    run, _ = searched
    plan = (run / "plan.md").read_text()
    assert "## Search space (--budget)" in plan
    for steps in range(1, 6):
        assert f"{steps}/1/{steps + 1}" in plan
    assert "fence: step counts 1..5" in plan and "test_deepseek_v4_flash_h200_deep.py" in plan
    assert "speculative_adaptive" in plan  # the tree defines it: adaptive drafting is in the space, cited
    names = {v["name"] for v in json.loads((run / "measure_plan.json").read_text())["variants"]}
    assert len(names) == 7 and "baseline" in names


def test_every_candidate_gets_a_first_look_and_the_dropped_ones_nothing_more(searched):
    run, _ = searched
    runs = _runs(run)
    drops = {e["variant"]: e for e in _events(run, "search_drop")}
    extra = [e["variant"] for e in _events(run, "search_repeat")]
    assert len(runs) == 7 and all({f"{v}-c1", f"{v}-c4"} <= set(tags) for v, tags in runs.items())
    assert drops and "baseline" not in drops and extra[0] == "baseline"
    for name, event in drops.items():
        assert sorted(runs[name]) == sorted([f"{name}-c1", f"{name}-c4"])  # the first look only
        for level in event["levels"].values():
            assert level["ratio_low"] > 1 and level["low"] > level["best_high"]  # ranges do not overlap
    for name in extra:
        assert len(runs[name]) == 2 * REPEATS
    servers = sorted(p.name for p in (run / "jobs").glob("serve-*"))
    assert [s for s in servers if s.startswith("serve-baseline")] == ["serve-baseline"]  # all its repeats on one start
    budget = _events(run, "search_budget")
    assert budget and budget[0]["server_start_s"] > 0 and set(budget[0]["repeat_s"]) == {"1", "4"}


def test_the_console_shows_the_budget_left_and_each_decision(searched):
    _, out = searched
    assert "search budget: search " in out.stdout and " left; the work left is estimated at " in out.stdout
    assert "search drop: " in out.stdout and "measurably worse than the best at every level" in out.stdout
    assert "search repeat: baseline " in out.stdout


def test_the_search_picks_what_a_full_measurement_picks_at_half_the_points_or_fewer(world, searched):
    run, _ = searched
    root, checkout, tok, env = world
    folder = root / "full"
    folder.mkdir()
    out = run_cli(*_args(checkout, tok, "--mtp-steps", "2,4"), cwd=folder, env=env)  # the whole space, no budget
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    full = only_run(folder)
    full_runs, search_runs = _runs(full), _runs(run)
    assert len(full_runs) == 6  # the space less adaptive drafting, which --mtp-steps cannot name
    full_verdict = json.loads((full / "verdict.json").read_text())
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["recommended"] == full_verdict["recommended"] and verdict["recommended"] not in (None, "baseline")
    whole_space = len(search_runs) * 2 * REPEATS  # every setting of the space at every level and repeat
    assert sum(map(len, full_runs.values())) == len(full_runs) * 2 * REPEATS
    assert 2 * sum(map(len, search_runs.values())) <= whole_space


@pytest.mark.parametrize("budget, words", [("0", "minimum is 5m"), ("-5m", "5m"), ("2m", "minimum is 5m"),
                                           ("ninety", "duration")])
def test_a_budget_of_nothing_or_below_one_server_start_is_refused_before_any_job(tmp_path, budget, words):
    out = run_cli("enable MTP", f"--budget={budget}", "--plan-only", cwd=tmp_path)
    assert_refusal(out, "--budget", words)
    assert not (tmp_path / "runs").exists()


def test_mtp_steps_outside_the_fenced_space_is_refused_with_its_fence(world, tmp_path):
    root, checkout, tok, env = world
    out = run_cli(*_args(checkout, tok, "--budget", "30m", "--mtp-steps", "7"), cwd=tmp_path, env=env)
    assert_refusal(out, "--mtp-steps", "7", "search space", "1..5")


def test_replay_re_derives_every_search_decision(searched):
    run, _ = searched
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()
    assert report.search is not None and not report.search.problems
    drops, repeats = len(_events(run, "search_drop")), len(_events(run, "search_repeat"))
    assert report.search.checked == drops + repeats + len(_events(run, "search_budget")) and drops and repeats


def test_a_search_killed_after_its_drops_resumes_without_measuring_a_point_twice(world, tmp_path):
    root, checkout, tok, env = world
    # die right after the 11th save of bench/search.json (the baseline's grant and points, 6 first looks, the
    # drops, the baseline's turn among the survivors, the winner's grant): the winner's repeats not yet measured
    spec = "tools.measure.search:_Clock.save:11:after"
    died = subprocess.run([sys.executable, str(HERE / "fault_injector.py"), spec, "agent.commands.cli:main",
                           *_args(checkout, tok, "--budget", "30m")], cwd=tmp_path, env=clean_env(env),
                          capture_output=True, text=True, timeout=limit(600))
    assert died.returncode == -signal.SIGKILL, died.stdout[-2000:] + died.stderr[-2000:]
    run = only_run(tmp_path)
    before = json.loads((run / "bench" / "search.json").read_text())
    assert before["drops"] and len(before["extra"]) == 2 and before["extra"][0] == "baseline"
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    after = json.loads((run / "bench" / "search.json").read_text())
    assert after["drops"] == before["drops"]  # no drop decision lost or changed
    assert Counter(e["variant"] for e in _events(run, "search_drop")) == Counter(set(before["drops"]))
    for name, tags in _runs(run).items():
        assert len(tags) == len(set(tags)), (name, tags)  # no finished point measured again
    assert after["extra"] == before["extra"]  # the grant made before the kill is kept, not decided again
    assert len(_events(run, "search_repeat")) == 2
    assert len(_runs(run)[after["extra"][1]]) == 2 * REPEATS
    assert after["spent_s"] > before["spent_s"]
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()
    assert report.search is not None and not report.search.problems


def test_when_the_budget_runs_out_the_verdict_names_what_was_not_measured(world, tmp_path):
    root, checkout, tok, env = world
    # die right after the drops are saved (the baseline's grant and points, 6 first looks, then the drops), then
    # spend the budget as a long earlier attempt would have: the survivors' repeats no longer fit
    spec = "tools.measure.search:_Clock.save:9:after"
    died = subprocess.run([sys.executable, str(HERE / "fault_injector.py"), spec, "agent.commands.cli:main",
                           *_args(checkout, tok, "--budget", "30m")], cwd=tmp_path, env=clean_env(env),
                          capture_output=True, text=True, timeout=limit(600))
    assert died.returncode == -signal.SIGKILL, died.stdout[-2000:] + died.stderr[-2000:]
    run = only_run(tmp_path)
    state_file = run / "bench" / "search.json"
    state = json.loads(state_file.read_text())
    assert state["drops"] and state["extra"] == ["baseline"]
    state_file.write_text(json.dumps({**state, "spent_s": state["budget_s"] - 1}))
    lines = {name: len(tags) for name, tags in _runs(run).items()}
    resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert {name: len(tags) for name, tags in _runs(run).items()} == lines  # nothing more was measured
    verdict = json.loads((run / "verdict.json").read_text())
    survivors = [n for n in lines if n not in state["drops"] and n != "baseline"]
    assert survivors and lines["baseline"] == 2 * REPEATS
    assert "not measured within --budget" in verdict["reason"]
    assert all(f"{name}: {REPEATS - 1} more repeat(s)" in verdict["reason"] for name in survivors), verdict["reason"]
    assert "not measured within --budget" in resumed.stdout
    left = [e for e in _events(run, "search_budget") if e["left_s"] <= 1]
    assert left and all(e["estimate_s"] > e["left_s"] for e in left)
