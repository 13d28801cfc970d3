"""The model's architecture is decided once, by preflight, in the documented order (config.json, else
--arch, else the SGLang tree; docs/evidence.md), and every reader takes that decision; the checkpoint's
config.json is read once in a campaign.

Real parts: the CLI, the campaign, the run folder, the SGLang 0.5.23 wheel as the source tree, real
checkpoint configs from ../shared/checkpoints. Doubles: the OpenAI-compatible model
(tests/doubles/openai_server.py) and no GPU (no nvidia-smi on PATH: GPU steps are planned).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import clean_env, run_cli
from tests.conftest import shared_checkpoints
from tests.doubles.openai_server import Reply, ScriptedOpenAI, ToolCall
from tests.slowdown import limit
from agent.run.trace import read_trace

NO_GPU = {"PATH": "/usr/bin:/bin"}
MODEL = "deepseek-ai/DeepSeek-V4-Flash"  # the tree's model classes match it to DeepseekV4ForCausalLM
OTHER = "DeepseekV3ForCausalLM"  # a real class of the tree; its hooks do not limit the algorithm to EAGLE/DSPARK
STANDALONE = {"flag": "--speculative-algorithm", "value": "STANDALONE", "evidence": "spec.py:31", "why": "speed"}
PLAN = {"steps": [{"kind": "infer_mtp", "why": "find the MTP flags"},
                  {"kind": "write_scripts", "why": "scripts for review"}],
        "extra_flags": [STANDALONE], "rationale": "MTP"}
NOTES = {"claims": [], "flag_proposals": [STANDALONE], "open_questions": []}


def _run(tmp_path: Path) -> Path:
    [run] = list((tmp_path / "runs").iterdir())
    return run


def _checkpoint(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(shared_checkpoints() / name / "config.json", folder / "config.json")
    return folder


def test_arch_reaches_the_evidence_the_flag_guard_and_the_report_alike(tmp_path, sglang_wheel_root):
    turns = [Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="plan")]),
             Reply(tool_calls=[ToolCall("submit_notes", NOTES, id="notes")])]
    with ScriptedOpenAI(turns) as server:
        done = run_cli("run", "enable MTP", "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                       "--sglang", str(sglang_wheel_root), "--model", MODEL, "--arch", OTHER,
                       "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path,
                       env={**NO_GPU, "OPENAI_API_KEY": "sk-test-arch"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    run = _run(tmp_path)
    decided = json.loads((run / "preflight.json").read_text())["architecture"]
    assert (decided["name"], decided["decided_by"], decided["overruled_arch"]) == (OTHER, "--arch", None)
    # the planner was told the same decision
    assert f"architecture {OTHER} given with --arch" in server.requests[0]["messages"][1]["content"]
    # the evidence
    answer = json.loads((run / "mtp.json").read_text())
    assert answer["architecture"] == OTHER and answer["architecture_decision"]["decided_by"] == "--arch"
    assert f"- architecture: {OTHER} (given with --arch)" in (run / "evidence.md").read_text()
    events = read_trace(run / "trace.jsonl").events
    assert [e["architecture"] for e in events if "architecture" in e and e.get("type") == "progress"] == [OTHER]
    # the flag guard, planner and research alike: judged for OTHER, so the DeepSeek-V4 hook's EAGLE/DSPARK rule
    # (which a guess from the model id would apply) does not reject STANDALONE
    review = json.loads((run / "flag_review.json").read_text())
    research = json.loads((run / "llm" / "research.json").read_text())["flag_review"]
    for judged in (review, research):
        assert (judged["architecture"], judged["architecture_decided_by"]) == (OTHER, "--arch")
        assert f"for architecture {OTHER} (given with --arch)" in judged["constraints"]
        assert [(v["flag"], v["verdict"]) for v in judged["verdicts"]] == [("--speculative-algorithm", "supported")]
    # the report
    report = (run / "report.md").read_text()
    assert f"- **architecture**: {OTHER} (given with --arch)\n" in report
    assert f"- architecture: {OTHER} (given with --arch)\n" in report  # its evidence section


def test_the_same_flag_is_rejected_when_preflight_decides_deepseek_v4(tmp_path, sglang_wheel_root):
    """The control for the test above: the same plan for the model's real architecture (no --arch: matched from
    the model name) is judged by the DeepSeek-V4 hook."""
    turns = [Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="plan")]),
             Reply(tool_calls=[ToolCall("submit_notes", NOTES, id="notes")])]
    with ScriptedOpenAI(turns) as server:
        done = run_cli("run", "enable MTP", "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                       "--sglang", str(sglang_wheel_root), "--model", MODEL, "--runs-dir", str(tmp_path / "runs"),
                       cwd=tmp_path, env={**NO_GPU, "OPENAI_API_KEY": "sk-test-arch"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    run = _run(tmp_path)
    review = json.loads((run / "flag_review.json").read_text())
    assert (review["architecture"], review["architecture_decided_by"]) == ("DeepseekV4ForCausalLM", "model name")
    assert [v["verdict"] for v in review["verdicts"]] == ["rejected"]
    assert json.loads((run / "mtp.json").read_text())["architecture"] == "DeepseekV4ForCausalLM"
    assert "- **architecture**: DeepseekV4ForCausalLM (matched from the model name to sglang/srt/models/" in \
        (run / "report.md").read_text()


def test_an_arch_that_config_json_contradicts_is_overruled_and_said(tmp_path, sglang_wheel_root):
    model_path = _checkpoint(tmp_path, "DeepSeek-V4-Flash")
    config = model_path / "config.json"
    done = run_cli("enable MTP", "--sglang", str(sglang_wheel_root), "--model", MODEL, "--model-path", str(model_path),
                   "--arch", OTHER, cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    said = f"--arch {OTHER} differs from DeepseekV4ForCausalLM in {config}: config.json decides"
    assert said in " ".join(done.stdout.split())  # the user sees it when the campaign starts (lines may wrap)
    run = _run(tmp_path)
    preflight = json.loads((run / "preflight.json").read_text())
    decided = preflight["architecture"]
    assert (decided["name"], decided["decided_by"], decided["cited"], decided["overruled_arch"]) == \
        ("DeepseekV4ForCausalLM", "config.json", str(config), OTHER)
    assert any(note.startswith(said) and "drop --arch" in note for note in preflight["notes"])
    answer = json.loads((run / "mtp.json").read_text())
    assert answer["architecture"] == "DeepseekV4ForCausalLM" and answer["architecture_decision"] == decided
    evidence = " ".join((run / "evidence.md").read_text().split())
    assert f"- architecture: DeepseekV4ForCausalLM (read from {config})" in evidence and f"- note: {said}" in evidence
    report = " ".join((run / "report.md").read_text().split())
    assert f"- **architecture**: DeepseekV4ForCausalLM (read from {config}) - **note**: {said}" in report


# Runs the CLI in this interpreter with an audit hook that logs every open of one file (the hook is this
# process's own: the children the campaign starts are not counted, only the agent's reads).
COUNT_OPENS = """
import os, sys
target, log = os.path.realpath(sys.argv[1]), sys.argv[2]
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) and \\
            os.path.realpath(os.fsdecode(args[0])) == target:
        with open(log, "a") as out:
            out.write(str(args[1]) + "\\n")
sys.addaudithook(hook)
sys.argv = ["dsv4-agent", *sys.argv[3:]]
from agent.commands.cli import main
main()
"""


def test_a_campaign_reads_the_checkpoint_config_once(tmp_path, sglang_wheel_root):
    model_path = _checkpoint(tmp_path, "DeepSeek-V4-Flash")
    opens = tmp_path / "opens.txt"
    done = subprocess.run([sys.executable, "-c", COUNT_OPENS, str(model_path / "config.json"), str(opens),
                           "enable MTP and tune kernels", "--sglang", str(sglang_wheel_root), "--model", MODEL,
                           "--model-path", str(model_path)], cwd=tmp_path, env=clean_env(NO_GPU),
                          capture_output=True, text=True, timeout=limit(600))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(opens.read_text().splitlines()) == 1, opens.read_text()
    run = _run(tmp_path)
    # and every reader had what that one read gave: the facts, the architecture, the tuning's shapes
    preflight = json.loads((run / "preflight.json").read_text())
    assert preflight["checkpoint"]["config"] == str(model_path / "config.json")
    assert preflight["architecture"]["decided_by"] == "config.json"
    shapes = json.loads((run / "tuning" / "shapes.json").read_text())
    assert shapes["shapes"] and all(s["source"].startswith("config.json:") for s in shapes["shapes"])
    assert json.loads((run / "mtp.json").read_text())["checkpoint"]["config"] == str(model_path / "config.json")
