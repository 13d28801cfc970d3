"""The evidence engine on real upstream files: the shared corpus laid over the 0.5.23 wheel as git
checkouts, with the wheel's own hooks ("new") and with older hooks and runners ("old")."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.messages import assert_refusal
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.recipes import ExtractRecipesArgs, extract_recipes

REPO = Path(__file__).resolve().parents[1]
DSV4 = "deepseek-ai/DeepSeek-V4-Flash"
EAGLE_314 = {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "3", "--speculative-eagle-topk": "1",
             "--speculative-num-draft-tokens": "4"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "dsv4-agent"), *args], cwd=REPO, capture_output=True,
                          text=True)


def _cited(root: Path, origin) -> str:
    return (root / origin.path).read_text().splitlines()[origin.line - 1]


@pytest.mark.parametrize("variant", ["new", "old"])
@pytest.mark.parametrize("model", [DSV4, "sgl-project/DeepSeek-V4-Flash-FP8"])
def test_flagship_on_both_hook_versions(corpus_checkouts, variant, model):
    root = corpus_checkouts[variant]
    answer = infer_mtp(InferMtpArgs(sglang=str(root), model=model))
    rec = answer.recommended
    assert answer.architecture == "DeepseekV4ForCausalLM" and rec is not None, answer.unknowns
    assert rec.flags == EAGLE_314  # never FROZEN_KV_MTP: the Gemma4-draft alias does not hold without a draft
    assert "test_dsv4_swa_radix_retract.py" in rec.origin.path
    for flag, origin in rec.flag_origins.items():
        assert rec.flags[flag] in _cited(root, origin) or flag == "--speculative-num-draft-tokens", flag
    # the conditional alias was decided (no draft path: not a Gemma4 assistant), not lifted out of its if
    assert not any("FROZEN_KV_MTP" in u and "not applied" in u for u in answer.unknowns)
    hook_rule = next(line for line in rec.rationale if "holds:" in line and "deepseek_v4_hook.py" in line)
    assert "EAGLE" in hook_rule


def test_env_of_the_recipe_is_vetted_and_cited(corpus_checkouts):
    root = corpus_checkouts["new"]
    rec = infer_mtp(InferMtpArgs(sglang=str(root), model="sgl-project/DeepSeek-V4-Flash-FP8")).recommended
    assert rec is not None
    assert rec.env == {"SGLANG_DSV4_FP4_EXPERTS": "0", "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "1024"}
    for name in rec.env:  # kept: SGLang's registry defines it, cited to its line there
        registry, line = rec.env_evidence[name].rsplit(" at ", 1)[1].rsplit(":", 1)
        assert name in (root / registry).read_text().splitlines()[int(line) - 1]
        assert "SGLANG_" in _cited(root, rec.env_origins[name])
    dropped = {d.name: d for d in rec.dropped}
    assert "test-only" in dropped["SGLANG_TEST_RETRACT"].reason and "Fault injection" in dropped["SGLANG_TEST_RETRACT"].reason
    assert dropped["SGLANG_OPT_SWA_RADIX_CACHE_COMPACT"].reason.startswith("SGLang does not read it")
    assert all(d.origin is not None and d.origin.path.endswith("test_dsv4_swa_radix_retract.py") for d in dropped.values())
    # another checkpoint's environment is not carried over to the original model
    other = infer_mtp(InferMtpArgs(sglang=str(root), model=DSV4)).recommended
    assert other is not None and other.env == {}
    assert {d.name for d in other.dropped if d.kind == "env"} >= {"SGLANG_DSV4_FP4_EXPERTS"}


def test_nightly_launch_settings_become_recipes_named_by_variant(corpus_checkouts):
    root = corpus_checkouts["new"]
    result = extract_recipes(ExtractRecipesArgs(root=str(root), package_dir=str(root / "python/sglang"),
                                                paths=["test/registered"], pattern=""))
    by_name = {r.name.split("::", 1)[1]: r for r in result.recipes}
    glm = by_name["TestGlm52Fp8[TP8+DP8+MTP]"]  # module-level lists + a function-local list, concatenated
    assert glm.model == "zai-org/GLM-5.2-FP8" and glm.tp == 8 and glm.variant == "TP8+DP8+MTP"
    assert glm.flags["--speculative-num-steps"] == "3" and glm.flags["--dp"] == "8"
    assert {"TestGlm52Fp8[TP8]", "TestGlm52Fp8[TP8+DP8]"} <= set(by_name)
    mistral = by_name["TestMistralLarge3[TP8+MTP]"]  # f-string over a module constant, env=
    assert mistral.flags["--speculative-draft-model-path"] == "mistralai/Mistral-Large-3-675B-Instruct-2512-Eagle"
    assert mistral.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    # a loop over a module-level list of dataclass configs, the env filled in the loop body
    amd = [r for r in result.recipes if r.name.startswith("test/registered/amd/accuracy/mi35x/test_gpt_oss")]
    assert {r.model for r in amd} == {"openai/gpt-oss-20b", "openai/gpt-oss-120b"}
    assert all(r.env == {"SGLANG_USE_AITER": "1"} and r.tp == 8 for r in amd)


def test_glm5_from_evidence_in_the_tree(corpus_checkouts):
    root = corpus_checkouts["new"]
    done = _cli("mtp", "--sglang", str(root), "--model", "zai-org/GLM-5-FP8", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["architecture"] == "GlmMoeDsaForCausalLM"
    note = answer["recommended"]["rationale"][0]
    path, line = re.search(r" at (\S+?):(\d+)\b", note).groups()  # the citation, whatever words follow it
    cited = (root / path).read_text().splitlines()[int(line) - 1]
    assert "GLM-5" in cited and "GlmMoeDsaForCausalLM" in cited
    assert answer["recommended"]["flags"] == EAGLE_314  # the GLM-5.2 MTP variant, same architecture
    assert "TestGlm52Fp8[TP8+DP8+MTP]" in answer["recommended"]["rationale"][1]


def test_unknown_architecture_recommends_nothing(corpus_checkouts, tmp_path):
    """No model file matches (the DeepSeek-V4 model module is gone): candidates are listed, but with the
    architecture unknown nothing is recommended, and certainly not FROZEN_KV_MTP."""
    root = tmp_path / "checkout"
    shutil.copytree(corpus_checkouts["old"], root, symlinks=True, ignore=shutil.ignore_patterns(".git"),
                    copy_function=os.link)  # hard links: fast; the files are only read or unlinked
    (root / "python/sglang/srt/models/deepseek_v4.py").unlink()
    answer = infer_mtp(InferMtpArgs(sglang=str(root), model="sgl-project/DeepSeek-V4-Flash-FP8"))
    assert answer.architecture is None and answer.recommended is None and answer.candidates
    assert any("pass --arch or --model-path" in u for u in answer.unknowns)
    assert "FROZEN_KV_MTP" not in json.dumps([c.flags for c in answer.candidates])
    with_arch = infer_mtp(InferMtpArgs(sglang=str(root), model="sgl-project/DeepSeek-V4-Flash-FP8",
                                       arch="DeepseekV4ForCausalLM"))
    assert with_arch.recommended is not None and with_arch.recommended.flags == EAGLE_314


def test_a_checkout_without_the_package_init_is_refused(corpus_checkouts, tmp_path):
    root = tmp_path / "checkout"
    shutil.copytree(corpus_checkouts["new"], root, symlinks=True, ignore=shutil.ignore_patterns(".git"),
                    copy_function=os.link)  # hard links: fast; the files are only read or unlinked
    (root / "python/sglang/__init__.py").unlink()
    done = _cli("mtp", "--sglang", str(root), "--model", DSV4)
    assert_refusal(done, "python/sglang/__init__.py", "--sglang", quiet=True)


def test_a_fallback_whose_helper_is_missing_is_named_so(corpus_checkouts):
    """The older hooks import the automatic-steps chooser from server_args.py, which the wheel's copy
    no longer defines: the fallback is there, its helper is not, and the answer says exactly that."""
    old = infer_mtp(InferMtpArgs(sglang=str(corpus_checkouts["old"]), model="tencent/Hunyuan-X", arch="HYV3ForCausalLM"))
    assert old.recommended is None
    why = next(u for u in old.unknowns if u.startswith("no evidence for a speculative configuration"))
    assert "no MTP fallback" not in why and "draft-path fallback (python/sglang/srt/arg_groups/speculative_hook.py:" in why
    assert "auto_choose_speculative_params" in why and "python/sglang/srt/server_args.py does not define it" in why
    line = int(why.split("(python/sglang/srt/arg_groups/speculative_hook.py:")[2].split(")")[0])
    cited = (corpus_checkouts["old"] / "python/sglang/srt/arg_groups/speculative_hook.py").read_text().splitlines()
    assert "import auto_choose_speculative_params" in cited[line - 1]
    new = infer_mtp(InferMtpArgs(sglang=str(corpus_checkouts["new"]), model="tencent/Hunyuan-X", arch="HYV3ForCausalLM"))
    assert new.recommended is not None and new.recommended.flags == EAGLE_314  # one commit: the helper is there
