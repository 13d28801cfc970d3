"""A fresh campaign's first GPU job starts before LangGraph and the research and report code are imported
(agent/campaign/early_lane.py): the campaign on the doubles of tests/campaign_fixtures.py, with the names in
``sys.modules`` written at its first job launch (tests/modules_at_call.py), ends finished and replays."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.run.trace import read_trace
from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import clean_env, only_run
from tests.slowdown import limit

PROBE = Path(__file__).resolve().parent / "modules_at_call.py"
LAUNCH = "tools.jobs.local:LocalExecutor.launch"
# what the first job must not wait for: the graph machinery, the LLM and research code (the MTP evidence
# engine, the scripts), the measure step and the report
NOT_BEFORE_THE_FIRST_JOB = ("langgraph", "langchain", "langsmith", "openai", "matplotlib", "agent.campaign.graph",
                            "agent.campaign.nodes", "agent.report", "agent.campaign.llm.", "agent.steps.write_scripts",
                            "agent.steps.benchmark", "tools.mtp")
ALLOWED = ("agent.campaign.llm.budget",)  # the budget's exception type, which the campaign's driver catches


def _campaign_with_probe(root: Path, wheel_root: Path, goal: str,
                         *more: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    modules = root / "modules-at-first-launch.json"
    done = subprocess.run([sys.executable, str(PROBE), LAUNCH, str(modules), "agent.commands.cli:main",
                           *campaign_args(root, wheel_root, goal), *more],
                          cwd=root, env=clean_env(campaign_env(root, unit_s=0.05)), capture_output=True, text=True,
                          timeout=limit(240))
    return done, json.loads(modules.read_text()) if modules.exists() else []


def test_the_first_gpu_job_starts_before_the_graph_and_research_code_are_imported(tmp_path, sglang_wheel_root):
    done, modules = _campaign_with_probe(tmp_path, sglang_wheel_root, "tune kernels and benchmark")
    assert done.returncode == 0, done.stdout + done.stderr
    assert modules, "no job was launched"
    early = [m for m in modules if m.startswith(NOT_BEFORE_THE_FIRST_JOB) and m not in ALLOWED]
    assert early == [], early
    run = only_run(tmp_path)
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    events = read_trace(run / "trace.jsonl").events
    first_launch = next(e["seq"] for e in events if e["type"] == "job_launched")
    first_checkpoint = next(e["seq"] for e in events if e["type"] == "checkpoint_saved")
    assert first_launch < first_checkpoint  # launched before the graph existed
    assert [e["node"] for e in events if e["type"] == "node_started"].count("gpu_lane") == 1
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()


def test_a_plan_that_syncs_first_runs_its_gpu_lane_in_the_graph(tmp_path, sglang_wheel_root):
    """A pull changes the tree the tuning reads: the GPU lane waits for the graph's sync node."""
    done, modules = _campaign_with_probe(tmp_path, sglang_wheel_root, "tune kernels", "--pull")
    assert "Traceback" not in done.stdout + done.stderr
    assert "langgraph.graph" in modules
    events = read_trace(only_run(tmp_path) / "trace.jsonl").events
    started = [e["node"] for e in events if e["type"] == "node_started"]
    assert started.index("sync") < started.index("gpu_lane")
