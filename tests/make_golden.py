"""Makes the golden runs under ``tests/golden/`` by running the product's own campaign.

    .venv/bin/python tests/make_golden.py            # regenerate every golden run in place
    .venv/bin/python tests/make_golden.py llm-mtp    # only the named ones

Each golden is a real ``dsv4-agent "GOAL"`` run through the CLI in a scratch folder with no GPU
(nothing named ``nvidia-smi`` on PATH), then copied in without the checkpoint database and lock.
``playbook-mtp-tune`` uses the deterministic playbook; ``llm-mtp`` plans with an LLM, played by
the loopback OpenAI-compatible TEST DOUBLE ``tests/doubles/openai_server.py`` (scripted answers:
submit a plan; in the research lane, one search and notes citing its first hit), so the recorded
``llm_request``/``llm_response`` events are the real client's.
Regenerate after a step adapter lands or the campaign's decisions change; the tests say when.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(ROOT))

GOALS = {"playbook-mtp-tune": "enable MTP and tune kernels", "llm-mtp": "enable MTP and benchmark it"}
LEFT_OUT = {"checkpoint.sqlite", ".lock", "checkpoint.sqlite-wal", "checkpoint.sqlite-shm"}
LLM_PLAN = {"steps": [{"kind": "infer_mtp", "why": "find the MTP flags the tree supports"},
                      {"kind": "write_scripts", "why": "scripts for review"},
                      {"kind": "benchmark", "why": "baseline vs MTP", "params": {"concurrency": [1, 8]}}],
            "rationale": "MTP first, then measure it"}
RESEARCH_SEARCH = {"pattern": "speculative_num_steps", "glob": ["*.py"], "max_hits": 3}


def research_notes(request: dict):
    """The scripted research answer: one claim citing the first search hit the agent returned."""
    from tests.doubles.openai_server import Reply, ToolCall

    hit = re.search(r'"path": "([^"]+)",\n\s*"line": (\d+)', request["messages"][-1]["content"])
    claims = [{"text": "speculative_num_steps is a field of the Spec arguments", "citations": [f"{hit[1]}:{hit[2]}"]}]
    return Reply(tool_calls=[ToolCall("submit_notes", {"claims": claims}, id="notes-1")])


def _clean_env() -> dict[str, str]:
    """The environment minus our settings, keys, and any GPU tool: the run must not depend on the host."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DSV4_LLM", "OPENAI_")) and k not in ("DSV4_GPUS", "DSV4_EXECUTOR", "DSV4_RUNS_DIR")}
    bin_dir = Path(sys.executable).parent
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    return env


def run_campaign(name: str, scratch: Path) -> Path:
    """Run the campaign for golden ``name`` under ``scratch``; return its run folder."""
    cli = [str(Path(sys.executable).parent / "dsv4-agent"), GOALS[name], "--runs-dir", str(scratch / "runs")]
    if name == "llm-mtp":
        from tests.doubles.openai_server import Reply, ScriptedOpenAI, ToolCall

        script = [Reply(tool_calls=[ToolCall("submit_plan", LLM_PLAN, id="call-1")]),  # planner
                  Reply(tool_calls=[ToolCall("search", RESEARCH_SEARCH, id="research-1")]),  # research lane
                  research_notes]
        with ScriptedOpenAI(script) as server:
            _run(cli + ["--llm-base-url", server.base_url, "--llm-model", "scripted-model"], scratch)
    else:
        _run(cli, scratch)
    runs = sorted((scratch / "runs").iterdir())
    if len(runs) != 1:
        raise SystemExit(f"expected one run folder in {scratch / 'runs'}, found {len(runs)}")
    return runs[0]


def _run(cli: list[str], cwd: Path) -> None:
    done = subprocess.run(cli, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or "run planned" not in done.stdout and "run finished" not in done.stdout:
        raise SystemExit(f"campaign failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


def copy_run(run: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(run, dest, ignore=lambda _d, names: [n for n in names if n in LEFT_OUT or ".tmp" in n])
    return dest


def main() -> None:
    for name in sys.argv[1:] or GOALS:
        with tempfile.TemporaryDirectory(prefix="dsv4-golden-") as tmp:
            run = run_campaign(name, Path(tmp))
            dest = copy_run(run, GOLDEN / name)
        print(f"{name}: {dest} ({sum(1 for _ in dest.rglob('*') if _.is_file())} files)")


if __name__ == "__main__":
    main()
