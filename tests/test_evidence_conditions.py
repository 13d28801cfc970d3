"""Every rule kind under a condition that holds, one that does not, and one that cannot be decided.

The fixture hooks (tests/fixtures/evidence/conditions) put one rule of each kind under
``strict_mode != "off" and (strict_mode == "on" or probe_hardware())``: --strict-mode on makes it
hold, off makes it false, and the default "auto" leaves it to a call at run time (undecidable).
A rule applies only where its condition holds; an undecidable one is reported with its citation
and not applied; nothing an applicable rule rejects is recommended.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
from tools.mtp.pick import ALGO, DRAFT, STEPS, TOKENS, TOPK, Judge
from tools.source.fields import read_fields

TREE = Path(__file__).parent / "fixtures" / "evidence" / "conditions"
HOOK = "python/sglang/srt/arg_groups/conditional_hook.py"
ARCH = "AcmeStrictForCausalLM"
MODES = {"holds": "on", "does_not": "off", "undecidable": None}  # None: the default, "auto"


@pytest.fixture(scope="module")
def judge() -> Judge:
    rules = extract_constraints(ExtractConstraintsArgs(root=str(TREE), package_dir=str(TREE / "python/sglang"))).rules
    return Judge(rules, ARCH, read_fields(TREE / "python/sglang", TREE))


def _with_mode(flags: dict[str, str], state: str) -> dict[str, str]:
    mode = MODES[state]
    return {**flags, "--strict-mode": mode} if mode else dict(flags)


def _line(kind: str) -> int:
    text = (TREE / HOOK).read_text().splitlines()
    markers = {"allowed_algorithms": "assert cfg.speculative_algorithm in", "requires": "assert cfg.speculative_eagle_topk",
               "forbids": "if cfg.speculative_num_steps > 4", "all_or_none": "assert cfg.speculative_eagle_topk is None",
               "alias": 'return "EAGLE"', "draft_path_fallback": "speculative_draft_model_path=cfg.model_path",
               "topk1_draft_tokens": "speculative_num_draft_tokens=cfg.speculative_num_steps + 1",
               "auto_default": "return (2, 1, 3)"}
    return next(i for i, line in enumerate(text, 1) if markers[kind] in line)


def _noted(findings, kind: str) -> bool:
    return any(f.rule.kind == kind and f.rule.origin.cite() == f"{HOOK}:{_line(kind)}" and HOOK in f.note()
               for f in findings)


# check kinds: (flags that the rule rejects, what the problem says)
CHECKS = {
    "allowed_algorithms": ({ALGO: "NGRAM"}, "is not allowed"),
    "requires": ({ALGO: "EAGLE", STEPS: "3", TOPK: "2", TOKENS: "8"}, "must be 1"),
    "forbids": ({ALGO: "EAGLE", STEPS: "5", TOPK: "1", TOKENS: "6"}, "at most 4 steps"),
    "all_or_none": ({ALGO: "EAGLE", TOPK: "1"}, "must be given together"),
}


@pytest.mark.parametrize("kind", sorted(CHECKS))
@pytest.mark.parametrize("state", sorted(MODES))
def test_checks_apply_only_where_their_condition_holds(judge, kind, state):
    flags, words = CHECKS[kind]
    verdict = judge.check(_with_mode(flags, state))
    rejected_by = [(p, r) for p, r in verdict.problems if r.kind == kind]
    if state == "holds":
        assert rejected_by and words in rejected_by[0][0] and rejected_by[0][1].origin.line == _line(kind)
    else:
        assert rejected_by == []  # not applied: neither when false nor when undecidable
    assert _noted(verdict.undecided, kind) == (state == "undecidable")


@pytest.mark.parametrize("state", sorted(MODES))
def test_alias(judge, state):
    flags, origins, rationale, undecided = _with_mode({ALGO: "NEXTN"}, state), {}, [], []
    judge.resolve_alias(flags, origins, rationale, undecided)
    assert flags[ALGO] == ("EAGLE" if state == "holds" else "NEXTN")
    assert (origins.get(ALGO) is not None and origins[ALGO].line == _line("alias")) == (state == "holds")
    assert _noted(undecided, "alias") == (state == "undecidable")


@pytest.mark.parametrize("state", sorted(MODES))
def test_draft_path_fallback(judge, state):
    flags = _with_mode({ALGO: "EAGLE", DRAFT: "acme/strict-draft", STEPS: "2", TOPK: "1", TOKENS: "3"}, state)
    undecided: list = []
    judge.repair(flags, {}, [], undecided)
    assert (DRAFT not in flags) == (state == "holds")  # dropped only where SGLang would take the target's own
    assert _noted(undecided, "draft_path_fallback") == (state == "undecidable")


@pytest.mark.parametrize("state", sorted(MODES))
def test_topk1_draft_tokens(judge, state):
    flags = _with_mode({ALGO: "EAGLE", STEPS: "3", TOPK: "1", TOKENS: "7"}, state)
    undecided: list = []
    judge.repair(flags, {}, [], undecided)
    assert flags[TOKENS] == ("4" if state == "holds" else "7")
    assert _noted(undecided, "topk1_draft_tokens") == (state == "undecidable")


@pytest.mark.parametrize("state", sorted(MODES))
def test_auto_default(judge, state):
    flags = _with_mode({ALGO: "EAGLE"}, state)
    undecided: list = []
    judge.fill_automatic(flags, {}, [], undecided)
    chosen = {f: flags.get(f) for f in (STEPS, TOPK, TOKENS)}
    assert chosen == ({STEPS: "2", TOPK: "1", TOKENS: "3"} if state == "holds" else dict.fromkeys(chosen))
    assert _noted(undecided, "auto_default") == (state == "undecidable")


def test_through_the_inference_an_undecidable_rule_is_reported_not_applied(tmp_path):
    """A recipe the strict rule would reject: with the condition undecidable (the serve flags leave
    --strict-mode at "auto"), it is recommended, and the answer names the rule it did not apply."""
    import shutil

    from tools.mtp.infer import InferMtpArgs, infer_mtp

    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)
    recipe = tree / "test/registered/test_acme_strict.py"
    recipe.parent.mkdir(parents=True)
    recipe.write_text('from sglang.test.test_utils import popen_launch_server\n\nMODEL = "acme/Strict-7B"\n\n\n'
                      "class TestAcmeStrict:\n    @classmethod\n    def setUpClass(cls):\n"
                      '        popen_launch_server(MODEL, "http://127.0.0.1:1", '
                      'other_args=["--speculative-algorithm", "NGRAM"])\n')
    answer = infer_mtp(InferMtpArgs(sglang=str(tree), model="acme/Strict-7B", arch=ARCH))
    assert answer.recommended is not None and answer.recommended.flags[ALGO] == "NGRAM"
    cited = f"{HOOK}:{_line('allowed_algorithms')}"
    assert any(u.startswith("not applied:") and cited in u and "cannot be decided" in u for u in answer.unknowns)
