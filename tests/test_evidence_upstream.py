"""The evidence engine on registered tests it had never seen (tests/fixtures/upstream, written from
upstream SGLang's constructs) laid over the corpus checkout: nothing that is not a value is
recommended, hardware choices become variants, environment inputs are inputs, and the pick across
algorithms says its rule."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests import shared_trees
from tests.conftest import missing, shared_corpus
from tools.mtp.infer import InferMtpArgs, infer_mtp

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream"
ALGO, STEPS, DRAFT = "--speculative-algorithm", "--speculative-num-steps", "--speculative-draft-model-path"


@pytest.fixture(scope="module")
def tree(tmp_path_factory, sglang_wheel_root) -> Path:
    corpus = shared_corpus()
    if corpus is None:
        missing("no shared/corpus found next to the repository (CI provides it at ../shared)")
    root = shared_trees.linked_copy(shared_trees.corpus_checkout(corpus, sglang_wheel_root, False),
                                    tmp_path_factory.mktemp("upstream") / "checkout")
    shared_trees.copy_over(UPSTREAM / "test", root / "test")
    return root


def _answer(tree: Path, model: str, **more):
    return infer_mtp(InferMtpArgs(sglang=str(tree), model=model, **more))


def _line(tree: Path, origin) -> str:
    return (tree / origin.path).read_text().splitlines()[origin.line - 1]


def test_a_value_written_to_a_temporary_file_is_never_recommended(tree):
    answer = _answer(tree, "Qwen/Qwen3-32B")
    adaptive = next(c for c in answer.candidates if c.name.endswith("::TestAdaptiveEagle3Qwen3"))
    assert adaptive.unread == {"--speculative-adaptive-config": "f.name"} and not adaptive.complete
    assert "--speculative-adaptive-config" not in adaptive.flags
    assert any("--speculative-adaptive-config is `f.name`" in r and "test_adaptive_speculative_qwen3.py:" in r
               for r in adaptive.rejected)
    rec = answer.recommended  # the plain recipe, though the adaptive one has fewer steps
    assert rec is not None and rec.flags[STEPS] == "3" and "--speculative-adaptive" not in rec.flags
    assert "<unresolved" not in answer.model_dump_json()


def test_a_class_attribute_launch_list_with_a_hardware_choice_gives_one_variant_per_branch(tree):
    answer = _answer(tree, "Qwen/Qwen3-Next-80B-A3B-Instruct")
    mtp = {c.condition: c for c in answer.candidates if "TestQwen3NextMTP" in c.name}
    assert set(mtp) == {"is_blackwell()", "not is_blackwell()"}
    assert mtp["is_blackwell()"].other_flags["--attention-backend"] == "fa4"
    assert mtp["not is_blackwell()"].other_flags["--attention-backend"] == "fa3"
    for cand in mtp.values():  # read through DefaultServerBase.setUpClass, cited to the test's own lines
        assert cand.name.endswith(f"::TestQwen3NextMTP[{cand.condition}]") and cand.complete
        assert cand.origin.path == "test/registered/4-gpu-models/test_qwen3_next_mtp.py"
        assert cand.written_flags[ALGO] == "NEXTN" and cand.flags[ALGO] == "EAGLE"
        assert any("NEXTN written as EAGLE" in r and "speculative_hook.py:" in r for r in cand.rewrites)
    on_b200 = _answer(tree, "Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="NVIDIA B200").recommended
    on_h100 = _answer(tree, "Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="NVIDIA H100 80GB HBM3").recommended
    assert "the variant for is_blackwell()" in on_b200.rationale[1]
    assert "the variant for not is_blackwell()" in on_h100.rationale[1]


def test_a_draft_path_only_the_environment_gives_is_an_input_not_a_value(tree):
    answer = _answer(tree, "Qwen/Qwen3-14B")
    cand = next(c for c in answer.candidates if "TestEagle3LocalDraft" in c.name)
    assert cand.needs == {DRAFT: "SGLANG_TEST_QWEN3_14B_EAGLE3_DRAFT"} and DRAFT not in cand.flags
    assert not cand.complete
    rec = answer.recommended
    assert rec is not None and DRAFT not in rec.flags and rec.needs == {DRAFT: "SGLANG_TEST_QWEN3_14B_EAGLE3_DRAFT"}
    assert "SGLANG_TEST_QWEN3_14B_EAGLE3_DRAFT" in _line(tree, rec.needs_origins[DRAFT])
    assert any(line.startswith(f"you must give {DRAFT}") for line in rec.rationale)


def test_the_pick_across_algorithms_compares_like_with_like_and_says_so(tree):
    """Llama-3.1-8B: STANDALONE (a 1B draft) has the fewest steps, but EAGLE3 is what most of the
    evidence for this model uses; the rule is stated in the rationale."""
    rec = _answer(tree, "meta-llama/Llama-3.1-8B-Instruct").recommended
    assert rec is not None and rec.flags[ALGO] == "EAGLE3"
    rule = next(line for line in rec.rationale if line.startswith("pick rule:"))
    assert "EAGLE3 in 4 file(s)" in rule and "STANDALONE in 3 file(s)" in rule and "like for like" in rule
    assert rule.index("EAGLE3") < rule.index("STANDALONE") < rule.index("DFLASH")


def _tree_models(tree: Path) -> list[str]:
    from tools.recipes import ExtractRecipesArgs, extract_recipes

    found = extract_recipes(ExtractRecipesArgs(root=str(tree), package_dir=str(tree / "python/sglang"),
                                               speculative_only=True, max_recipes=5000))
    return sorted({r.model for r in found.recipes if r.model})


def test_no_rendered_script_holds_a_placeholder_or_an_empty_required_value(tree, tmp_path):
    """Every candidate of every model the tree has speculative recipes for, rendered as a serve script
    (directly, and through the campaign's own path for the recommendation and the other evidence
    settings): no `<unresolved`, and no flag that takes a value left without one."""
    from agent.steps.measure_plan import _choice_variant, mtp_variant
    from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
    from tools.mtp.variants import evidence_choices
    from tools.scripts import EnvChoice, FlagChoice, ServeVariant
    from tools.measure.script_render import render_serve_script
    from tools.source.fields import read_fields

    switches = {flag for f in read_fields(tree / "python/sglang", tree).fields if "bool" in f.type for flag in f.flags}
    rules = extract_constraints(ExtractConstraintsArgs(root=str(tree), package_dir=str(tree / "python/sglang"))).rules
    base = ServeVariant(name="baseline", model_path="/models/x", tp=1, gpus=[0])
    rendered = 0
    models = _tree_models(tree)
    assert {"Qwen/Qwen3-32B", "Qwen/Qwen3-14B", "Qwen/Qwen3-Next-80B-A3B-Instruct"} <= set(models)
    for model in models:
        answer = _answer(tree, model)
        variants = []
        for cand in answer.candidates:
            variants.append(ServeVariant.model_validate({**base.model_dump(), "name": "cand", "flags": [
                FlagChoice(flag=k, value=v, source=cand.origin.cite()).model_dump() for k, v in cand.flags.items()],
                "env": [EnvChoice(name=k, value=v).model_dump() for k, v in cand.env_kept.items()]}))
        if answer.recommended is not None and not answer.recommended.needs:
            variants.append(mtp_variant(base, answer.recommended)[0])
        choices, _ = evidence_choices(answer, rules)
        variants += [_choice_variant(base, c) for c in choices if c.source != "recommended"]
        for variant in variants:
            script = render_serve_script(variant, "/opt/sglang/bin/python", 30000)
            assert "<unresolved" not in script, (model, variant.name)
            for choice in variant.flags:
                assert choice.value != "" or choice.flag in switches, (model, choice.flag, "has no value")
            rendered += 1
    assert rendered > len(models)  # every model gave at least its candidates


def test_rules_run_in_sglangs_order_so_nextn_is_refused_for_deepseek_v4(tree):
    """SGLang's pipeline runs the model hook (DeepSeek-V4: EAGLE or DSPARK only) before the speculative
    hook resolves NEXTN to EAGLE; the order is read from the pipeline, and the candidate shows both the
    written NEXTN and its rewrite."""
    answer = _answer(tree, "deepseek-ai/DeepSeek-V4-Pro")
    cand = next(c for c in answer.candidates if "TestDeepseekV4ProNextN" in c.name)
    assert cand.written_flags[ALGO] == "NEXTN" and cand.flags[ALGO] == "EAGLE"
    assert any("NEXTN written as EAGLE" in r for r in cand.rewrites)
    why = cand.rejected[0]
    assert why.startswith(f"{ALGO} NEXTN is not allowed (only EAGLE, DSPARK); checked as written: "
                          "handle_model_specific_adjustments (python/sglang/srt/arg_groups/pipeline.py:")
    hook = why.rsplit("(", 1)[1].rstrip(")")
    assert hook.startswith("python/sglang/srt/arg_groups/deepseek_v4_hook.py:")
    assert "NEXTN" not in _line(tree, type(cand.origin)(path=hook.rsplit(":", 1)[0], line=int(hook.rsplit(":", 1)[1])))
    steps = [int(part.split(")")[0]) for part in why.split("pipeline.py:")[1:]]
    assert steps[0] < steps[1]  # the model hook's step is run first
    pipeline = (tree / "python/sglang/srt/arg_groups/pipeline.py").read_text().splitlines()
    assert "handle_model_specific_adjustments" in pipeline[steps[0] - 1]
    assert "handle_speculative_decoding" in pipeline[steps[1] - 1]
    rec = answer.recommended  # the recipe is refused; the hooks' own choice stands
    assert rec is not None and rec.flags[ALGO] == "EAGLE" and "automatic choice" in " ".join(rec.rationale)


def test_every_file_naming_the_model_without_a_usable_recipe_is_explained(tree):
    """Qwen3-14B: the registered recipe needs an input, an offline-engine test is not a launch the
    reader follows; Qwen3-Next: an older test launches it without speculative flags. Each file is
    named with path:line and what was not read."""
    unknowns = _answer(tree, "Qwen/Qwen3-14B").unknowns
    engine = next(u for u in unknowns if "test_engine_spec_qwen3_14b.py" in u)
    assert engine.startswith("not read: test/registered/spec/test_engine_spec_qwen3_14b.py:")
    assert "the model goes to Engine(...) at line 15, which is not a server launch the reader follows" in engine
    at = int(engine.split(".py:", 1)[1].split(" ", 1)[0])
    assert "MODEL" in _line(tree, type(_answer(tree, "Qwen/Qwen3-14B").recommended.origin)(
        path="test/registered/spec/test_engine_spec_qwen3_14b.py", line=at))
    draft = next(u for u in unknowns if "test_eagle3_env_draft.py" in u)
    assert draft.startswith("incomplete: ") and "$SGLANG_TEST_QWEN3_14B_EAGLE3_DRAFT" in draft
    next_unknowns = _answer(tree, "Qwen/Qwen3-Next-80B-A3B-Instruct").unknowns
    plain = next(u for u in next_unknowns if "without --speculative-* flags" in u)
    assert "test/registered/4-gpu-models/test_qwen3_next_models.py:" in plain
    assert not any("test_qwen3_next_mtp.py" in u for u in next_unknowns)  # its recipes are usable: no miss
    # a namesake constant in another file (TARGET_MODEL) is no mention of this model
    assert not any("test_adaptive_speculative_qwen3.py" in u for u in unknowns)
