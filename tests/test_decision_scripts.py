"""run_measure.sh on its own (a GPU host without the agent): repeats, SGLang's real GSM8K check against
the server double, and `dsv4-agent report` deciding from the folder it leaves."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.campaign_fixtures import DOUBLES
from tests.cli_helpers import run_cli
from tests.decision_fixtures import write_gsm8k
from tests.doubles.tokenizer import build_tokenizer
from tests.slowdown import limit
from tools.measure.accuracy import AccuracyPlan
from tools.measure.script_render import RenderScriptsArgs, render_scripts
from tools.scripts import FlagChoice, MeasurePlan, ServeVariant


def _mtp(name: str, steps: int, tok: str) -> ServeVariant:
    flags = {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": str(steps),
             "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": str(steps + 1)}
    return ServeVariant(name=name, model_path=tok, flags=[FlagChoice(flag=k, value=v) for k, v in flags.items()])


def test_run_measure_repeats_points_gates_accuracy_and_the_report_decides(tmp_path):
    tok = str(build_tokenizer(tmp_path / "tok"))
    data = write_gsm8k(tmp_path / "gsm8k.jsonl", n=8)
    plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path=tok), _mtp("mtp-1-1-2", 1, tok),
                                 _mtp("mtp-2-1-3", 2, tok)],
                       concurrency=[1], tokenizer=tok, input_len=4, output_len=16, min_prompts=3, warmup_requests=1,
                       ready_timeout_s=30, repeats=2, client_module="sglang.benchmark.serving",
                       accuracy=AccuracyPlan(questions=8, data_path=str(data), shots=2))
    run = tmp_path / "run"
    render_scripts(RenderScriptsArgs(out_dir=str(run), plan=plan, sglang_python=str(DOUBLES / "sglang_python")))
    (run / "measure_plan.json").write_text(plan.model_dump_json())
    (run / "config.json").write_text(json.dumps({"goal": "measure by hand", "settings": {}}))  # a planned run's
    port = __import__("tools.measure.server", fromlist=["free_port"]).free_port()
    env = {**os.environ, "PORT": str(port), "DSV4_DOUBLE_REAL_PYTHON": sys.executable,
           "DSV4_DOUBLE_GSM8K": str(data), "DSV4_DOUBLE_GSM8K_DEGRADED": "2/1/3"}
    done = subprocess.run(["bash", str(run / "run_measure.sh")], capture_output=True, text=True, timeout=limit(300), env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    tags = [json.loads(x)["tag"] for x in (run / "bench" / "mtp-1-1-2.jsonl").read_text().splitlines()]
    assert tags == ["mtp-1-1-2-c1", "mtp-1-1-2-c1-r2"]
    acc = {v.name: json.loads((run / "bench" / "accuracy" / f"{v.name}.json").read_text()) for v in plan.variants}
    assert (acc["baseline"]["accuracy"], acc["mtp-1-1-2"]["accuracy"], acc["mtp-2-1-3"]["accuracy"]) == (1.0, 1.0, 0.5)
    assert not list(run.glob("tmp_output_gsm8k.txt"))  # SGLang's check writes its dump in bench/accuracy/, not here
    out = run_cli("report", str(run), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    md = (run / "report.md").read_text()
    assert "mtp-2-1-3 is never recommended: accuracy 0.500 is below" in md
    assert "| mtp-2-1-3 | 0.500 |" in md and "| FAIL |" in md
    assert (run / "results.csv").read_text().count("\n") == 1 + 3
