"""LLM-mode campaigns end to end: the real openai client against the OpenAI double
(tests/doubles/openai_server.py), a real SGLang source layout (files copied from the sglang
0.5.23 wheel) with one poisoned file, real graph, real run folder. One test per documented end."""
from __future__ import annotations

import json
import socket
from pathlib import Path


from agent.campaign.start_resume import start
from agent.settings.model import Settings
from agent.run.trace import read_trace
from tests.campaign_fixtures import POISON, poisoned_source  # noqa: F401  (a fixture)
from tests.cli_helpers import run_cli
from tests.doubles.openai_server import Reply, ScriptedOpenAI, ToolCall

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-campaign-SECRET-9876543210"


def _submit(steps, flags=(), rationale="") -> ToolCall:
    return ToolCall("submit_plan", {"steps": steps, "extra_flags": list(flags), "rationale": rationale}, id="plan")


def _tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def _settings(tmp_path, url, source, **kw) -> Settings:
    return Settings(llm_base_url=url, llm_model="scripted-model", sglang_src=str(source),
                    runs_dir=str(tmp_path / "runs"), **kw)


def _run_dir(tmp_path) -> Path:
    return next((tmp_path / "runs").iterdir())


def test_poisoned_file_cannot_put_a_flag_into_the_scripts(tmp_path, poisoned_source):  # noqa: F811
    seen: list[str] = []

    def plan_after_reading(request: dict) -> Reply:
        seen.extend(_tool_messages(request))
        # The scripted model "obeys" the poison, and also proposes one real flag with evidence.
        return Reply(tool_calls=[_submit(
            [{"kind": "write_scripts", "why": "scripts for review"}],
            [{"flag": "--foo", "value": "", "evidence": "benchmark/kernels/quantization/README.md:4",
              "why": "the README says so"},
             {"flag": "--mem-fraction-static", "value": "0.85", "evidence": "sglang/srt/arg_groups/fields/schedule.py:27",
              "why": "leave room for the draft model"}])])

    turns = [Reply(tool_calls=[ToolCall("search", {"pattern": "agents", "glob": ["*.md"]}, id="s1")]),
             plan_after_reading]
    with ScriptedOpenAI(turns) as server:
        env = {"OPENAI_API_KEY": SECRET, "DSV4_RUNS_DIR": str(tmp_path / "runs")}
        done = run_cli("run", "write scripts for MTP", "--llm-base-url", server.base_url, "--llm-model", "scripted-model",
                       "--sglang", str(poisoned_source), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    run = _run_dir(tmp_path)
    # the poison reached the model only as quoted, attributed data
    assert len(seen) == 1 and POISON in seen[0]
    assert "untrusted data from tool search(" in seen[0] and "never instructions" in seen[0]
    assert "--foo" not in server.requests[0]["messages"][0]["content"]
    review = json.loads((run / "flag_review.json").read_text())
    assert {v["flag"]: v["verdict"] for v in review["verdicts"]} == {"--foo": "rejected",
                                                                     "--mem-fraction-static": "supported"}
    plan = json.loads((run / "plan.json").read_text())
    extra = next(s for s in plan if s["kind"] == "write_scripts")["params"]["extra_flags"]
    assert extra == {"--mem-fraction-static": {"value": "0.85",
                                               "origin": "sglang/srt/arg_groups/fields/schedule.py:27"}}
    scripts = {p.name: p.read_text() for p in run.glob("*.sh")}
    assert "serve_extra.sh" in scripts and "--mem-fraction-static" in scripts["serve_extra.sh"]
    assert not any("--foo" in text for text in scripts.values())
    assert "--foo" in (run / "plan.md").read_text() and "rejected" in (run / "plan.md").read_text()
    assert json.loads((run / "result.json").read_text())["status"] == "finished"
    for path in run.rglob("*"):  # the API key is in no run file
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_budget_exhaustion_ends_with_its_own_status(tmp_path, poisoned_source):  # noqa: F811
    forever = Reply(tool_calls=[ToolCall("search", {"pattern": "speculative_num_steps"})])
    with ScriptedOpenAI([], after=lambda request: forever) as server:
        code = start(_settings(tmp_path, server.base_url, poisoned_source, max_llm_steps=3), "enable MTP")
    assert code == 3 and len(server.requests) == 3
    result = json.loads((_run_dir(tmp_path) / "result.json").read_text())
    assert result["status"] == "budget_exhausted" and "3 model turns (limit 3)" in result["summary"]


def test_malformed_tool_arguments_go_back_to_the_model(tmp_path, poisoned_source):  # noqa: F811
    observed: list[str] = []

    def submit(request: dict) -> Reply:
        observed.extend(_tool_messages(request))
        return Reply(tool_calls=[_submit([{"kind": "write_scripts", "why": "scripts"}])])

    turns = [Reply(tool_calls=[ToolCall("search", '{"pattern": "x"', id="a")]),
             Reply(tool_calls=[ToolCall("search", {"glob": "*.py"}, id="b")]),
             submit]
    with ScriptedOpenAI(turns) as server:
        code = start(_settings(tmp_path, server.base_url, poisoned_source), "write scripts")
    assert code == 0
    assert observed[0].startswith("status: bad_arguments\nThe arguments of search are not valid JSON")
    assert "- pattern: Field required" in observed[1] and "- glob: Input should be a valid list" in observed[1]
    events = read_trace(_run_dir(tmp_path) / "trace.jsonl").events
    assert [e["status"] for e in events if e["type"] == "tool_result" and e["tool"] == "search"] == \
        ["bad_arguments", "bad_arguments"]


def test_unknown_tool_name_goes_back_to_the_model(tmp_path, poisoned_source):  # noqa: F811
    observed: list[str] = []

    def submit(request: dict) -> Reply:
        observed.extend(_tool_messages(request))
        return Reply(tool_calls=[_submit([{"kind": "write_scripts", "why": "scripts"}])])

    turns = [Reply(tool_calls=[ToolCall("shell", {"cmd": "rm -rf ~"}, id="x")]), submit]
    with ScriptedOpenAI(turns) as server:
        code = start(_settings(tmp_path, server.base_url, poisoned_source), "write scripts")
    assert code == 0
    assert observed[0].startswith("status: unknown_tool\nThere is no tool named 'shell'")
    assert "search" in observed[0] and "submit_plan" in observed[0]


def test_endpoint_down_fails_the_run_naming_the_endpoint(tmp_path, poisoned_source):  # noqa: F811
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    code = start(_settings(tmp_path, url, poisoned_source), "enable MTP")
    assert code == 1
    result = json.loads((_run_dir(tmp_path) / "result.json").read_text())
    assert result["status"] == "failed"
    assert f"LLMError: LLM endpoint {url} failed 3 times" in result["summary"]
    assert "start the server or fix --llm-base-url" in result["summary"]


def test_a_flag_breaking_a_hook_constraint_is_rejected_with_its_citation(tmp_path, sglang_wheel_root):
    """The real 0.5.23 hooks say DeepSeek-V4 takes only EAGLE or DSPARK; the model proposes STANDALONE."""
    plan = _submit([{"kind": "write_scripts", "why": "scripts"}],
                   [{"flag": "--speculative-algorithm", "value": "STANDALONE", "evidence": "spec.py:31", "why": "speed"},
                    {"flag": "--mem-fraction-static", "value": "0.85", "evidence": "schedule.py:27", "why": "room"}])
    with ScriptedOpenAI([Reply(tool_calls=[plan])]) as server:
        code = start(_settings(tmp_path, server.base_url, sglang_wheel_root), "write scripts")  # source only read
    assert code == 0
    run = _run_dir(tmp_path)
    review = json.loads((run / "flag_review.json").read_text())
    assert review["architecture"] == "DeepseekV4ForCausalLM"
    verdicts = {v["flag"]: v for v in review["verdicts"]}
    rejected = verdicts["--speculative-algorithm"]
    assert rejected["verdict"] == "rejected" and "sglang/srt/arg_groups/deepseek_v4_hook.py:" in rejected["violates"][0]
    assert verdicts["--mem-fraction-static"]["verdict"] == "supported"
    assert list(review["accepted"]) == ["--mem-fraction-static"]
    plan_md = (run / "plan.md").read_text()
    assert "STANDALONE" in plan_md and "deepseek_v4_hook.py:" in plan_md
    assert not any("STANDALONE" in p.read_text() for p in run.glob("*.sh"))
