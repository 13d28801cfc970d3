"""Bad input in the tree: a recipe whose environment must not reach a script, an undefined flag, a
damaged checkout. Clear notes, nothing invalid recommended, nothing secret written."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from agent.steps.measure_plan import mtp_variant
from tests.messages import assert_refusal
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.scripts import ServeVariant
from tools.measure.script_render import render_serve_script

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "checkout"
REPO = Path(__file__).resolve().parents[1]
RECIPE = "test/registered/test_acme_env.py"


def _answer():
    return infer_mtp(InferMtpArgs(sglang=str(FIXTURE), model="acme/Moe-Env-7B"))


def test_recipe_env_keeps_only_what_sglang_reads_and_lists_the_rest():
    rec = _answer().recommended
    assert rec is not None and rec.env == {"SGLANG_ACME_FAST_DRAFT": "1", "NCCL_DEBUG": "INFO"}
    assert rec.env_evidence["SGLANG_ACME_FAST_DRAFT"] == "defined by SGLang at python/sglang/srt/environ.py:13"
    dropped = {d.name: d for d in rec.dropped if d.kind == "env"}
    assert set(dropped) == {"LD_PRELOAD", "PYTHONPATH", "SGLANG_TEST_ACME_CRASH", "HF_TOKEN"}
    assert dropped["LD_PRELOAD"].reason.startswith("SGLang does not read it")
    assert "Fault injection and regression tests" in dropped["SGLANG_TEST_ACME_CRASH"].reason
    assert dropped["HF_TOKEN"].value == "<redacted>" and "credential" in dropped["HF_TOKEN"].reason
    lines = (FIXTURE / RECIPE).read_text().splitlines()
    for d in dropped.values():  # each cited to the line of the recipe that sets it
        assert d.origin.path == RECIPE and d.name in lines[d.origin.line - 1] or d.value in lines[d.origin.line - 1]


def test_an_undefined_speculative_flag_is_dropped_with_a_note():
    answer = _answer()
    rec = answer.recommended
    assert rec is not None and "--speculative-foo" not in rec.flags
    assert rec.flags["--speculative-num-steps"] == "2"  # the rest of the recipe stands
    foo = next(d for d in rec.dropped if d.name == "--speculative-foo")
    assert foo.kind == "flag" and "no SGLang argument field defines it" in foo.reason
    assert foo.origin.path == RECIPE and "--speculative-foo" in (FIXTURE / RECIPE).read_text().splitlines()[foo.origin.line - 1]
    assert any("dropped --speculative-foo" in line for line in rec.rationale)
    assert "hf_not_a_real_token" not in answer.model_dump_json()  # not even among the candidates


def test_the_serve_script_carries_a_citation_above_every_env_line_and_nothing_dropped(tmp_path):
    rec = _answer().recommended
    base = ServeVariant(name="baseline", model_path="/models/acme", tp=1, gpus=[0])
    variant, _ = mtp_variant(base, rec)
    script = render_serve_script(variant, "/opt/sglang/bin/python", 30000)
    lines = script.splitlines()
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    for banned in ("LD_PRELOAD", "PYTHONPATH", "SGLANG_TEST_ACME_CRASH", "HF_TOKEN", "--speculative-foo"):
        assert banned not in code, banned  # the comments may say what was dropped and why; no command sets it
    assert "hf_not_a_real_token" not in script
    exports = [i for i, line in enumerate(lines) if line.startswith("export ") and "CUDA_VISIBLE_DEVICES" not in line]
    assert len(exports) == 2
    for i in exports:
        comment = lines[i - 1]
        assert re.match(r"# test/registered/test_acme_env\.py:\d+ \(", comment), comment
    assert "environ.py:13" in lines[exports[0] - 1] or "environ.py:13" in lines[exports[1] - 1]
    path = tmp_path / "serve_mtp.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_a_tree_without_the_package_init_is_refused_with_the_fix(tmp_path):
    root = tmp_path / "checkout"
    shutil.copytree(FIXTURE, root)
    os.remove(root / "python/sglang/__init__.py")
    done = subprocess.run([str(Path(sys.executable).parent / "dsv4-agent"), "mtp", "--sglang", str(root), "--model",
                           "acme/Moe-Mtp-7B"], cwd=REPO, capture_output=True, text=True)
    assert_refusal(done, "python/sglang/__init__.py", "missing", "git checkout --", quiet=True)
