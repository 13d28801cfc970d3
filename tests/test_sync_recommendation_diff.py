"""The recommendation diff as a pure function over MtpAnswer-shaped dicts."""
from __future__ import annotations

import copy

from tools.sync.recommendation_diff import diff_recommendations

HOOK = "python/sglang/srt/arg_groups/deepseek_v4_hook.py"
ANSWER = {
    "model": "deepseek-ai/DeepSeek-V4-Flash", "architecture": "DeepseekV4ForCausalLM",
    "constraints": [{"rule": "speculative_algorithm in (EAGLE, DSPARK)", "origin": {"path": HOOK, "line": 140}},
                    {"rule": "EAGLE requires speculative_eagle_topk == 1", "origin": {"path": HOOK, "line": 146}}],
    "recommended": {"flags": {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "3",
                              "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "4"},
                    "env": {}, "rationale": "registered test", "origin": {"path": "test/registered/a.py", "line": 10},
                    "flag_origins": {"--speculative-num-steps": {"path": "test/registered/a.py", "line": 12},
                                     "--speculative-algorithm": {"path": "test/registered/a.py", "line": 11}}},
    "unknowns": [],
}


def test_identical_answers_are_unchanged_even_when_lines_move():
    moved = copy.deepcopy(ANSWER)
    moved["constraints"][0]["origin"]["line"] = 152
    diff = diff_recommendations(ANSWER, moved)
    assert diff.status == "unchanged" and not diff.flags and not diff.constraints


def test_flags_added_removed_changed_with_citations():
    new = copy.deepcopy(ANSWER)
    flags = new["recommended"]["flags"]
    flags["--speculative-num-steps"] = "1"
    flags["--speculative-num-draft-tokens"] = "2"
    del flags["--speculative-eagle-topk"]
    flags["--speculative-dspark-block-size"] = "8"
    new["recommended"]["flag_origins"]["--speculative-num-steps"] = {"path": "test/registered/b.py", "line": 7}
    new["recommended"]["env"] = {"SGLANG_ENABLE_SPEC_V2": "1"}
    diff = diff_recommendations(ANSWER, new)
    assert diff.status == "changed"
    got = {(c.name, c.change, c.old, c.new, c.cite) for c in diff.flags}
    assert got == {
        ("--speculative-num-steps", "changed", "3", "1", "test/registered/b.py:7"),
        ("--speculative-num-draft-tokens", "changed", "4", "2", "test/registered/a.py:10"),
        ("--speculative-eagle-topk", "removed", "1", None, "test/registered/a.py:10"),
        ("--speculative-dspark-block-size", "added", None, "8", "test/registered/a.py:10"),
    }
    assert [(e.name, e.change, e.new) for e in diff.env] == [("SGLANG_ENABLE_SPEC_V2", "added", "1")]


def test_new_and_dropped_constraints_are_cited():
    new = copy.deepcopy(ANSWER)
    new["constraints"] = [ANSWER["constraints"][0],
                          {"rule": "only DSPARK is supported", "origin": {"path": HOOK, "line": 150}}]
    diff = diff_recommendations(ANSWER, new)
    assert [(c.rule, c.change, c.cite) for c in diff.constraints] == [
        ("only DSPARK is supported", "added", f"{HOOK}:150"),
        ("EAGLE requires speculative_eagle_topk == 1", "removed", f"{HOOK}:146")]


def test_recommendation_that_disappears():
    new = copy.deepcopy(ANSWER)
    new["recommended"] = None
    new["unknowns"] = ["no registered test for this GPU"]
    diff = diff_recommendations(ANSWER, new)
    assert diff.status == "changed" and diff.recommended_before and not diff.recommended_after
    assert {c.change for c in diff.flags} == {"removed"} and len(diff.flags) == 4
    assert diff.unknowns_added == ["no registered test for this GPU"]


def test_no_previous_and_no_new():
    assert diff_recommendations(None, ANSWER).status == "no_previous"
    assert diff_recommendations(ANSWER, None).status == "not_available"
