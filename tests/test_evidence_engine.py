"""Evidence engine on the fixture checkout (tests/fixtures/evidence) and on the real sglang 0.5.23 wheel."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.messages import assert_refusal
from tools.base import ToolError
from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.recipes import ExtractRecipesArgs, extract_recipes
from tools.source.search import SearchArgs, search
from tools.source.resolve import ResolveSourceArgs, resolve_source
from tools.source.read import ReadSourceFileArgs, read_source_file
from tools.source.spec_catalog import SpecCatalogArgs, spec_catalog

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "checkout"
REPO = Path(__file__).resolve().parents[1]


def _source(root: Path):
    return resolve_source(ResolveSourceArgs(path=str(root)))


@pytest.fixture(scope="module")
def git_checkout(tmp_path_factory) -> Path:
    """A real git repository holding a copy of the fixture checkout."""
    root = tmp_path_factory.mktemp("sglang") / "sglang"
    shutil.copytree(FIXTURE, root)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "fixture"]):
        subprocess.run(cmd, cwd=root, check=True, env=env)
    return root


def test_resolve_checkout_reports_commit_and_version(git_checkout):
    info = _source(git_checkout)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=git_checkout, capture_output=True, text=True).stdout.strip()
    assert (info.kind, info.commit, info.version) == ("checkout", head, "0.9.1.dev0")
    assert info.package_dir.endswith("python/sglang") and "test/registered" not in info.lacks


def test_resolve_package_dir_and_bad_paths(tmp_path):
    info = _source(FIXTURE / "python")
    assert info.kind == "package" and info.root == str((FIXTURE / "python").resolve())
    assert "test/registered" in info.lacks
    with pytest.raises(ToolError, match="does not exist"):
        _source(tmp_path / "nope")
    with pytest.raises(ToolError, match="not an SGLang source"):
        _source(tmp_path)


def test_resolve_through_the_sglang_python(tmp_path):
    """The SGLang interpreter is a real python with the fixture package on its path (a wrapper script)."""
    wrapper = tmp_path / "sglang-python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={FIXTURE / "python"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    env_before = os.environ.pop("SGLANG_SRC", None)
    try:
        info = resolve_source(ResolveSourceArgs(sglang_python=str(wrapper)))
    finally:
        if env_before is not None:
            os.environ["SGLANG_SRC"] = env_before
    assert info.kind == "package" and Path(info.package_dir) == (FIXTURE / "python" / "sglang").resolve()


def test_search_rg_and_python_fallback_agree():
    args = SearchArgs(pattern=r"speculative_eagle_topk\s*==", root=str(FIXTURE), glob=["*.py"])
    fast, slow = search(args), search(args, rg="")
    assert fast.engine == "rg" and slow.engine == "python"
    assert [(h.path, h.line) for h in fast.hits] == [(h.path, h.line) for h in slow.hits]
    assert ("python/sglang/srt/arg_groups/acme_hook.py", 9) in [(h.path, h.line) for h in fast.hits]
    capped = search(SearchArgs(pattern="speculative", root=str(FIXTURE), max_hits=2))
    assert capped.truncated and len(capped.hits) == 2 and "max_hits=2" in capped.note
    with pytest.raises(ToolError, match="pattern"):
        search(SearchArgs(pattern="(unclosed", root=str(FIXTURE)), rg="")


def test_recipes_cover_every_syntactic_pattern():
    info = _source(FIXTURE)
    result = extract_recipes(ExtractRecipesArgs(root=info.root, package_dir=info.package_dir))
    by_name = {r.name.split("::")[1]: r for r in result.recipes}
    mtp = by_name["TestAcmeMtp"]  # constant list + concat, f-string over a module constant, += , env dict
    assert mtp.flags["--speculative-algorithm"] == "NEXTN" and mtp.flags["--speculative-num-steps"] == "3"
    assert mtp.flags["--speculative-draft-model-path"] == "acme/Moe-Mtp-7B"  # imported constant
    assert mtp.flags["--mem-fraction-static"] == "0.8" and mtp.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert (mtp.tp, mtp.hardware) == (8, "stage-c-test-8-gpu-h200")
    assert mtp.flag_origins["--speculative-num-steps"].line == 14  # NUM_STEPS = 3, where the value is written
    inherited = by_name["TestAcmeFixtureDp"]  # base class in another file, overridden attrs, conditional +=
    assert inherited.flags["--speculative-num-steps"] == "2" and inherited.flags["--attn-dp-size"] == "8"
    assert inherited.model == "acme/Moe-Mtp-7B" and inherited.env == {"SGLANG_FIXTURE_FLAG": "1"}
    assert inherited.flag_origins["--speculative-num-steps"].path == "test/registered/8-gpu-models/test_acme_mtp.py"
    h100 = by_name["TestAcmeH100"]  # .append/.extend, dict subscript class attr
    assert h100.flags["--speculative-num-steps"] == "5" and h100.flags["--speculative-eagle-topk"] == "1"
    eagle3 = by_name["TestEagle3"]  # "--flag=value" form
    assert eagle3.flags["--speculative-draft-model-path"] == "acme/Llama-Eagle3-draft"
    sibling = by_name["TestAcmeNoSpec"]  # non-MTP sibling class in the same file
    assert not sibling.speculative and sibling.flags["--enable-dp-attention"] == ""
    assert any("test_broken.py" in w and "does not parse" in w for w in result.warnings)


def test_constraints_from_fixture_hooks():
    info = _source(FIXTURE)
    rules = extract_constraints(ExtractConstraintsArgs(root=info.root, package_dir=info.package_dir)).rules
    kinds = {(r.kind, r.origin.path.split("/")[-1], r.origin.line) for r in rules}
    assert ("allowed_algorithms", "acme_hook.py", 7) in kinds and ("requires", "acme_hook.py", 9) in kinds
    blocked = next(r for r in rules if r.origin.path.endswith("blocked_hook.py"))
    assert blocked.architectures == ["BlockedForCausalLM"] and blocked.values == ["NGRAM"]
    fancy = next(r for r in rules if r.origin.line == 11 and r.origin.path.endswith("acme_hook.py"))
    assert fancy.condition == "cfg.enable_fancy_cache"  # conditional: reported, not enforced
    alias = next(r for r in rules if r.kind == "alias")
    assert alias.values == ["EAGLE", "NEXTN"]
    fallback = next(r for r in rules if r.kind == "draft_path_fallback")
    assert fallback.architectures == ["AcmeMoeForCausalLM", "BlockedForCausalLM"] and fallback.algorithms == ["EAGLE", "EAGLE3"]
    autos = {tuple(r.values): r for r in rules if r.kind == "auto_default"}
    assert autos[("speculative_num_steps=2", "speculative_eagle_topk=1", "speculative_num_draft_tokens=3")].architectures == ["AcmeMoeForCausalLM"]
    assert {r.kind for r in rules} >= {"all_or_none", "topk1_draft_tokens", "forbids"}


def test_spec_catalog_fixture():
    info = _source(FIXTURE)
    catalog = spec_catalog(SpecCatalogArgs(package_dir=info.package_dir, root=info.root))
    flags = {f.flag: f for f in catalog.flags}
    assert "--enable-multi-layer-eagle" not in flags and not flags["--speculative-internal-state"].cli
    assert flags["--speculative-draft-model-path"].aliases == ["--speculative-draft-model"]
    assert flags["--speculative-attention-mode"].choices == ["prefill", "decode"]


@pytest.mark.parametrize("gpu,gpus,steps,where", [
    ("NVIDIA H100 80GB HBM3", 4, "3", "test_acme_h100.py"),
    ("NVIDIA H200", 8, "2", "test_acme_mtp.py"),
])
def test_mtp_picks_closest_hardware_and_conservative_steps(gpu, gpus, steps, where):
    answer = infer_mtp(InferMtpArgs(sglang=str(FIXTURE), model="acme/Moe-Mtp-7B", gpu=gpu, gpus=gpus))
    rec = answer.recommended
    assert answer.architecture == "AcmeMoeForCausalLM" and rec is not None
    assert rec.flags["--speculative-num-steps"] == steps and rec.origin.path.endswith(where)
    assert rec.flags["--speculative-eagle-topk"] == "1"
    assert rec.flags["--speculative-num-draft-tokens"] == str(int(steps) + 1)
    assert "--speculative-draft-model-path" not in rec.flags
    assert any("most conservative" in line for line in rec.rationale)
    assert set(rec.flag_origins) == set(rec.flags)


def test_mtp_keeps_separate_draft_for_eagle3_and_refuses_forbidden_model():
    llama = infer_mtp(InferMtpArgs(sglang=str(FIXTURE), model="meta-llama/Llama-3.1-8B-Instruct"))
    assert llama.recommended and llama.recommended.flags["--speculative-draft-model-path"] == "acme/Llama-Eagle3-draft"
    blocked = infer_mtp(InferMtpArgs(sglang=str(FIXTURE), model="acme/Blocked-1B"))
    assert blocked.architecture == "BlockedForCausalLM" and len(blocked.candidates) == 1
    assert blocked.recommended is None and any("no evidence" in u for u in blocked.unknowns)


def test_mtp_architecture_from_config_json(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["AcmeMoeForCausalLM"]}))
    answer = infer_mtp(InferMtpArgs(sglang=str(FIXTURE), model="someone/renamed-checkpoint", model_path=str(tmp_path)))
    rec = answer.recommended  # no recipe for this id: the hooks' automatic choice, made explicit
    assert answer.architecture == "AcmeMoeForCausalLM" and rec is not None
    assert rec.flags == {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "2",
                         "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "3"}


def test_read_source_file_is_confined_and_capped():
    text = read_source_file(ReadSourceFileArgs(root=str(FIXTURE), path="python/sglang/srt/arg_groups/acme_hook.py",
                                               start=7, end=9))
    assert text.text.splitlines()[0].strip().startswith("7") and "speculative_algorithm in" in text.text
    with pytest.raises(ToolError, match="outside"):
        read_source_file(ReadSourceFileArgs(root=str(FIXTURE / "python"), path="../test/registered/test_blocked.py"))


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it."""
    script = Path(sys.executable).parent / "dsv4-agent"
    return subprocess.run([str(script), *args], cwd=REPO, capture_output=True, text=True)


def test_cli_json_and_exit_codes(tmp_path):
    done = _cli("mtp", "--sglang", str(FIXTURE), "--model", "acme/Moe-Mtp-7B", "--gpu-count", "4", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recommended"]["flags"]["--speculative-algorithm"] == "EAGLE"
    missing = _cli("mtp", "--sglang", str(tmp_path / "nope"), "--model", "x")
    assert_refusal(missing, tmp_path / "nope", "does not exist")
    unknown = _cli("mtp", "--sglang", str(FIXTURE), "--model", "nobody/unknown")
    assert unknown.returncode == 1 and "No recommendation" in unknown.stdout


# ---- the real sglang 0.5.23 wheel -------------------------------------------------------------

def test_wheel_dsv4_recommendation(sglang_wheel_root):
    answer = infer_mtp(InferMtpArgs(sglang=str(sglang_wheel_root), model="deepseek-ai/DeepSeek-V4-Flash"))
    rec = answer.recommended
    assert answer.architecture == "DeepseekV4ForCausalLM" and rec is not None
    assert rec.flags["--speculative-algorithm"] == "EAGLE" and rec.flags["--speculative-eagle-topk"] == "1"
    assert int(rec.flags["--speculative-num-draft-tokens"]) == int(rec.flags["--speculative-num-steps"]) + 1
    assert "--speculative-draft-model-path" not in rec.flags
    for flag, origin in rec.flag_origins.items():  # every value cited to a real line
        lines = (sglang_wheel_root / origin.path).read_text().splitlines()
        assert 1 <= origin.line <= len(lines), flag
    hook = [c for c in answer.constraints if c.origin.path == "sglang/srt/arg_groups/deepseek_v4_hook.py"]
    cited = [(sglang_wheel_root / c.origin.path).read_text().splitlines()[c.origin.line - 1] for c in hook]
    assert any("speculative_algorithm in" in line for line in cited)
    assert any("speculative_eagle_topk == 1" in line for line in cited)


def test_wheel_catalog_complete_and_fixture_recipes(sglang_wheel_root):
    root = sglang_wheel_root
    catalog = spec_catalog(SpecCatalogArgs(package_dir=str(root / "sglang"), root=str(root)))
    declared = search(SearchArgs(pattern=r"^    speculative_\w+:", root=str(root / "sglang/srt/arg_groups/fields"),
                                 glob=["spec.py"]))
    assert len(catalog.flags) == len(declared.hits) > 30
    assert {"--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"} <= \
        {f.flag for f in catalog.flags}
    recipes = extract_recipes(ExtractRecipesArgs(root=str(root), package_dir=str(root / "sglang"),
                                                 paths=["sglang/test/server_fixtures"], speculative_only=True))
    names = {r.name.split("::")[1]: r for r in recipes.recipes}
    assert names["DsaMtpServerBase"].flags["--speculative-num-draft-tokens"] == "6"
    assert names["EagleServerBase"].flags["--speculative-eagle-topk"] == "8"
    assert names["SpecEagleServerBase"].model == "meta-llama/Llama-3.1-8B-Instruct"


def test_spec_catalog_and_flag_guard_read_the_same_fields(sglang_wheel_root):
    from agent.campaign.llm.flag_guard import server_flag_catalog

    root = sglang_wheel_root
    catalog = spec_catalog(SpecCatalogArgs(package_dir=str(root / "sglang"), root=str(root)))
    guard, _ = server_flag_catalog(root / "sglang", root)
    for entry in catalog.flags:
        if entry.cli:  # one reader: the same flag, cited to the same field line, aliases included
            assert guard[entry.flag] == entry.origin.cite()
            assert all(guard[alias] == entry.origin.cite() for alias in entry.aliases)
        else:
            assert entry.flag not in guard


def test_the_committed_schema_is_the_answer_model():
    from tools.mtp.infer import MtpAnswer

    committed = json.loads((REPO / "docs" / "mtp-answer.schema.json").read_text())
    assert committed == MtpAnswer.model_json_schema(), "regenerate docs/mtp-answer.schema.json (docs/evidence.md)"
