"""Generated scripts: bash -n, shellcheck, hostile values arrive literally, run_measure end to end.

Doubles: ``tests/doubles/argv_dump`` (an interpreter that records its argv) and
``tests/doubles/sglang_python`` (SGLang server double + SGLang's real bench client).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.doubles.tokenizer import build_tokenizer
from tests.slowdown import limit
from tools.base import ToolError
from tools.measure.script_render import RenderScriptsArgs, render_scripts, render_serve_script
from tools.scripts import EnvChoice, FlagChoice, MeasurePlan, ServeVariant

DOUBLES = Path(__file__).parent / "doubles"
SHELLCHECK = str(Path(sysconfig.get_path("scripts")) / "shellcheck")


def shellcheck(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([SHELLCHECK, *map(str, paths)], capture_output=True, text=True)


def mtp_variant(**kw) -> ServeVariant:
    return ServeVariant(name="mtp", model_path=kw.get("model", "/models/DeepSeek-V4-Flash"), tp=8,
                        gpus=[0, 1, 2, 3, 4, 5, 6, 7],
                        flags=[FlagChoice(flag="--speculative-algorithm", value=kw.get("value", "EAGLE"),
                                          source="sglang/srt/arg_groups/fields/spec.py:41"),
                               FlagChoice(flag="--enable-mtp-switch")],
                        env=[EnvChoice(name="SGLANG_ENABLE_SPEC_V2", value=kw.get("env", "1"),
                                       source="sglang/srt/environ.py:120")])


def test_scripts_have_header_cite_evidence_and_pass_bash_n_and_shellcheck(tmp_path):
    plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path="/m"), mtp_variant()], tokenizer="/tok")
    result = render_scripts(RenderScriptsArgs(out_dir=str(tmp_path), plan=plan))
    names = sorted(Path(p).name for p in result.scripts)
    assert names == ["run_measure.sh", "serve_baseline.sh", "serve_mtp.sh"]
    for path in map(Path, result.scripts):
        text = path.read_text()
        assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
        assert os.access(path, os.X_OK)
        assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    serve = (tmp_path / "serve_mtp.sh").read_text().splitlines()
    flag_line = next(i for i, line in enumerate(serve) if "--speculative-algorithm" in line)
    assert serve[flag_line - 1] == "# sglang/srt/arg_groups/fields/spec.py:41"
    assert serve[serve.index("args+=(--enable-mtp-switch)") - 1] == "# user choice"
    assert "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in serve
    checked = shellcheck(*map(Path, result.scripts))
    assert checked.returncode == 0, checked.stdout


def test_bad_names_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="must match"):
        ServeVariant(name="../x", model_path="/m")
    with pytest.raises(ValueError, match="environment variable name"):
        EnvChoice(name="A;B", value="x")
    with pytest.raises(ValueError, match="set by the script itself"):
        ServeVariant(name="x", model_path="/m", flags=[FlagChoice(flag="--port", value="1")])
    with pytest.raises(ToolError, match="repeat"):
        render_scripts(RenderScriptsArgs(out_dir="/tmp/unused", plan=MeasurePlan(
            variants=[ServeVariant(name="a", model_path="/m"), ServeVariant(name="a", model_path="/m")])))


HOSTILE = st.one_of(
    st.sampled_from(["'", '"', "$(touch /tmp/pwned)", "`id`", "; rm -rf ~", "a\nb", " x ", "\\", "${HOME}",
                     "*", "!", "-n", "\t", "\r\n", "'\"'\"'", "\u2028", "--port 1"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=HOSTILE, value=HOSTILE, env=HOSTILE, source=HOSTILE)
def test_hostile_values_arrive_as_single_literal_arguments(tmp_path, model, value, env, source):
    variant = mtp_variant(model=model, value=value, env=env)
    variant.flags[0].source = source
    variant.rationale = [source]
    script = tmp_path / "serve_mtp.sh"
    script.write_text(render_serve_script(variant, python="unused"))
    dump = tmp_path / "argv.json"
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=limit(20), env={
        **os.environ, "SGLANG_PYTHON": str(DOUBLES / "argv_dump"), "PORT": "31234", "ARGV_DUMP_FILE": str(dump),
        "ARGV_DUMP_ENV": "SGLANG_ENABLE_SPEC_V2,CUDA_VISIBLE_DEVICES", "DSV4_DOUBLE_REAL_PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr
    seen = json.loads(dump.read_text())
    assert seen["argv"] == variant.launch_args(31234)  # the same argv our own launcher uses
    assert seen["env"] == {"SGLANG_ENABLE_SPEC_V2": env, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout


def test_run_measure_runs_every_variant_and_records_a_failed_point(tmp_path):
    """run_measure.sh end to end: the server double and SGLang's real bench client; the mtp
    variant's server crashes at start, so its point is recorded as failed and the script exits 1."""
    tok = build_tokenizer(tmp_path / "tok")
    broken = ServeVariant(name="mtp", model_path=str(tok), env=[EnvChoice(name="DSV4_DOUBLE_EXIT_AT_START", value="3")])
    plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path=str(tok)), broken], concurrency=[2],
                       tokenizer=str(tok), input_len=8, output_len=8, min_prompts=4, warmup_requests=1,
                       ready_timeout_s=30)
    render_scripts(RenderScriptsArgs(out_dir=str(tmp_path), plan=plan, sglang_python=str(DOUBLES / "sglang_python")))
    port = __import__("tools.measure.server", fromlist=["free_port"]).free_port()
    run = subprocess.run(["bash", str(tmp_path / "run_measure.sh")], capture_output=True, text=True, timeout=limit(120),
                         env={**os.environ, "PORT": str(port), "DSV4_DOUBLE_REAL_PYTHON": sys.executable})
    assert run.returncode == 1, run.stdout + run.stderr
    lines = (tmp_path / "bench" / "baseline.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["tag"] == "baseline-c2"
    failure = json.loads((tmp_path / "bench" / "mtp.failures.jsonl").read_text())
    assert failure["concurrency"] == 2 and failure["reason"] == "server was not ready"
    assert "simulated crash" in run.stderr  # the server log tail is shown
    assert "1 failed point(s)" in run.stdout


def test_run_measure_snapshots_each_point_so_the_report_isolates_accept_length(tmp_path):
    """run_measure.sh records server snapshots around every point (same code as the sweep); the parser
    differences them: two points on one speculative server each get the double's 3 tokens/step."""
    from tools.measure.results import parse_jsonl

    tok = build_tokenizer(tmp_path / "tok")
    mtp = ServeVariant(name="mtp", model_path=str(tok), flags=[FlagChoice(flag="--speculative-algorithm", value="EAGLE")])
    plan = MeasurePlan(variants=[mtp], concurrency=[1, 2], tokenizer=str(tok), input_len=4, output_len=9,
                       min_prompts=3, warmup_requests=1, ready_timeout_s=30)
    render_scripts(RenderScriptsArgs(out_dir=str(tmp_path), plan=plan, sglang_python=str(DOUBLES / "sglang_python")))
    port = __import__("tools.measure.server", fromlist=["free_port"]).free_port()
    run = subprocess.run(["bash", str(tmp_path / "run_measure.sh")], capture_output=True, text=True, timeout=limit(120),
                         env={**os.environ, "PORT": str(port), "DSV4_DOUBLE_REAL_PYTHON": sys.executable})
    assert run.returncode == 0, run.stdout + run.stderr
    snaps = [json.loads(x) for x in (tmp_path / "bench" / "snapshots" / "mtp.jsonl").read_text().splitlines()]
    assert [(s["tag"], s["phase"]) for s in snaps] == [("mtp-c1", "before"), ("mtp-c1", "after"),
                                                      ("mtp-c2", "before"), ("mtp-c2", "after")]
    assert all(s["verify_calls"] is not None and not s["errors"] for s in snaps)
    assert snaps[3]["verify_calls"] > snaps[1]["verify_calls"] > 0
    records = parse_jsonl(tmp_path / "bench" / "mtp.jsonl").records
    assert [(r.concurrency, r.accept_length, r.accept_method) for r in records] == [(1, 3.0, "counters"),
                                                                                  (2, 3.0, "counters")]
