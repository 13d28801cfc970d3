"""The LLM planning loop as graph nodes: one checkpoint per model turn, resumable without re-asking.

Real parts: the agent (CLI, graph, SQLite checkpointer, run folder), the real ``openai`` client,
the SGLang argument definitions and hooks from the 0.5.23 wheel. The model is the loopback
OpenAI-compatible TEST DOUBLE ``tests/doubles/openai_server.py``; it counts the requests it gets.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from agent.campaign.llm import planning_nodes as llm_nodes
from agent.campaign.start_resume import start
from agent.settings.model import Settings
from agent.campaign.llm.conversation import CONVERSATION_FILE, Conversation
from agent.run.folder import RunFolder
from agent.campaign.runtime import Runtime
from agent.run.trace import TraceWriter, read_trace
from tests.cli_helpers import run_cli, start_agent, wait_for
from tests.doubles.openai_server import Reply, ScriptedOpenAI, ToolCall
from tests.campaign_fixtures import poisoned_source  # noqa: F401  (fixture: wheel flag definitions + poisoned README)
from tests.slowdown import limit
from tools.jobs.local import LocalExecutor

PLAN = {"steps": [{"kind": "write_scripts", "why": "scripts for review"}], "rationale": "scripts only"}


def _events(run: Path) -> list[dict]:
    return read_trace(run / "trace.jsonl").events


def _only_run(runs: Path) -> Path:
    [run] = list(runs.iterdir())
    return run




def test_kill_9_mid_plan_then_resume_continues_from_the_last_committed_turn(tmp_path, poisoned_source):  # noqa: F811
    turns = [Reply(tool_calls=[ToolCall("search", {"pattern": "speculative_num_steps", "glob": ["*.py"]}, id="s1")]),
             Reply(tool_calls=[ToolCall("job_status", {}, id="j1")]),
             Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="p-slow")], delay_s=120),  # the agent dies waiting
             Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="p1")])]
    runs = tmp_path / "runs"
    with ScriptedOpenAI(turns) as server:
        proc = start_agent("run", "write scripts for MTP", "--llm-base-url", server.base_url, "--llm-model",
                           "scripted-model", "--sglang", str(poisoned_source), "--runs-dir", str(runs), cwd=tmp_path)
        try:
            wait_for(lambda: len(server.requests) == 3 or proc.poll() is not None, 90, "the third model turn")
        finally:
            proc.send_signal(signal.SIGKILL)
            output = proc.communicate(timeout=limit(10))[0]
        assert len(server.requests) == 3, output
        run = _only_run(runs)
        assert not (run / "result.json").exists()
        recorded = Conversation.load(run / CONVERSATION_FILE)
        assert [e["kind"] for e in recorded.entries] == ["prompt", "reply", "observations", "reply", "observations"]
        before = _events(run)

        done = run_cli("resume", "latest", "--runs-dir", str(runs), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        # answered turns were not asked again: one more request, identical to the one the kill cut off
        assert len(server.requests) == 4
        assert server.requests[3]["messages"] == server.requests[2]["messages"]
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    after = _events(run)
    assert after[: len(before)] == before
    resumed = after[len(before):]
    assert [e["call"] for e in resumed if e["type"] == "llm_request"] == [3]
    assert not any(e["type"] == "tool_result" and e["tool"] in ("search", "job_status") for e in resumed)
    assert [e["node"] for e in resumed if e["type"] == "node_started"][:3] == ["llm_turn", "dispatch_tools", "llm_plan"]
    assert json.loads((run / "plan.json").read_text())[0]["kind"] == "write_scripts"
    assert Conversation.load(run / CONVERSATION_FILE).turns == 3


def _runtime(tmp_path: Path, url: str, **settings) -> Runtime:
    run = RunFolder.create(tmp_path / "runs", "plan")
    return Runtime(settings=Settings(llm_base_url=url, llm_model="scripted-model", runs_dir=str(tmp_path / "runs"),
                                     **settings),
                   run=run, trace=TraceWriter(run.trace_path), executor=LocalExecutor(run.jobs_dir), goal="plan")


def _preflight(root: Path) -> dict:
    return {"sglang_root": str(root), "gpus": [], "notes": [],
            "sglang_source": {"kind": "wheel", "root": str(root), "package_dir": str(root / "sglang")}}


def test_a_recorded_reply_is_reused_and_recorded_observations_are_not_run_again(tmp_path, sglang_wheel_root):
    """The checkpoint lagging the conversation file (a kill between the append and the commit)."""
    with ScriptedOpenAI([]) as server:
        rt = _runtime(tmp_path, server.base_url)
        state = {"goal": "plan", "preflight": _preflight(sglang_wheel_root)}
        state.update(llm_nodes.llm_start(rt, state))
        conversation = Conversation.load(rt.run.file(CONVERSATION_FILE))
        conversation.append({"kind": "reply", "turn": 1, "usage": {"total": 50}, "seconds": 0.1, "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "j", "type": "function", "function": {"name": "job_status", "arguments": "{}"}}]}})
        assert llm_nodes.llm_turn(rt, state)["llm"]["phase"] == "replied"
        assert server.requests == []  # never re-sent
        first = llm_nodes.dispatch_tools(rt, state)
        again = llm_nodes.dispatch_tools(rt, state)
    assert first == again and first["llm"]["phase"] == "observed" and first["llm"]["tokens"] == 50
    rt.trace.close()
    results = [e for e in _events(rt.run.path) if e["type"] == "tool_result"]
    assert [e["tool"] for e in results] == ["job_status"]  # the tool ran once
    assert len(Conversation.load(rt.run.file(CONVERSATION_FILE)).entries) == 3


@pytest.mark.parametrize("state, router, problem", [
    ({}, llm_nodes.after_turn, "phase None after 0 turns"),
    ({"llm": {"phase": "observed", "turns": 1}}, llm_nodes.after_turn, "phase 'observed'"),
    ({"llm": {"phase": "replied", "turns": 2}}, llm_nodes.after_dispatch, "phase 'replied'"),
    ({"llm": {"phase": "submitted", "answered": False}}, llm_nodes.after_dispatch, "answered=False"),
    ({"llm": {"phase": "bogus"}}, llm_nodes.after_dispatch, "phase 'bogus'"),
])
def test_routers_raise_on_impossible_states(state, router, problem):
    with pytest.raises(llm_nodes.RouteError, match="impossible|must") as err:
        router(state)
    assert problem in str(err.value)


def test_routers_on_possible_states():
    assert llm_nodes.after_turn({"llm": {"phase": "replied", "turns": 1}}) == "dispatch_tools"
    assert llm_nodes.after_dispatch({"llm": {"phase": "observed"}}) == "llm_turn"
    assert llm_nodes.after_dispatch({"llm": {"phase": "submitted", "answered": True}}) == "llm_plan"


def test_a_torn_last_line_is_cut_off_and_the_rest_continues(tmp_path):
    path = tmp_path / "conversation.jsonl"
    conversation = Conversation.load(path)
    conversation.append({"kind": "prompt", "messages": [{"role": "user", "content": "goal"}]})
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "reply", "turn": 1, "mess')  # the agent died mid-write
    again = Conversation.load(path)
    assert [e["kind"] for e in again.entries] == ["prompt"] and path.read_bytes().endswith(b"}\n")
    again.append({"kind": "reply", "turn": 1, "message": {"role": "assistant", "content": "hi"}, "usage": {"total": 7}})
    assert Conversation.load(path).tokens == 7 and Conversation.load(path).turns == 1


def test_token_budget_ends_the_run_and_resume_with_a_larger_budget_continues(tmp_path, poisoned_source):  # noqa: F811
    search = Reply(tool_calls=[ToolCall("search", {"pattern": "speculative_num_steps"})], prompt_tokens=90,
                   completion_tokens=10)
    turns = [search, search, Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="p")])]
    runs = tmp_path / "runs"
    with ScriptedOpenAI(turns) as server:
        first = run_cli("run", "write scripts", "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                        "--sglang", str(poisoned_source), "--runs-dir", str(runs), "--llm-max-tokens", "200", cwd=tmp_path)
        assert first.returncode == 3, first.stdout + first.stderr
        run = _only_run(runs)
        result = json.loads((run / "result.json").read_text())
        assert result["status"] == "budget_exhausted" and "200 tokens (limit 200)" in result["summary"]
        assert "--llm-max-tokens" in result["summary"] and len(server.requests) == 2
        again = run_cli("resume", run.name, "--runs-dir", str(runs), "--llm-max-tokens", "1000", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert len(server.requests) == 3  # the two answered turns were not asked again
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


def test_streaming_setting_streams_and_no_llm_means_no_llm_node(tmp_path, poisoned_source):  # noqa: F811
    with ScriptedOpenAI([Reply(tool_calls=[ToolCall("submit_plan", PLAN, id="p")])]) as server:
        settings = Settings(llm_base_url=server.base_url, llm_model="scripted-model", sglang_src=str(poisoned_source),
                            runs_dir=str(tmp_path / "llm-runs"), llm_stream=True)
        assert start(settings, "write scripts") == 0
    assert server.requests[0]["stream"] is True
    llm_nodes_run = {e["node"] for e in _events(_only_run(tmp_path / "llm-runs")) if e["type"] == "node_started"}
    assert {"llm_start", "llm_turn", "dispatch_tools", "llm_plan"} <= llm_nodes_run and "plan" not in llm_nodes_run

    settings = Settings(sglang_src=str(poisoned_source), runs_dir=str(tmp_path / "runs"))
    start(settings, "write scripts for MTP")
    run = _only_run(tmp_path / "runs")
    nodes = [e["node"] for e in _events(run) if e["type"] == "node_started"]
    assert nodes[:2] == ["preflight", "plan"] and not any(n.startswith(("llm", "dispatch")) for n in nodes)
    assert not (run / "llm").exists()
