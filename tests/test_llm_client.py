"""LLMClient through the real openai client against the OpenAI double (tests/doubles/openai_server.py)."""
from __future__ import annotations

import socket

import pytest

from agent.settings.model import Settings
from agent.campaign.llm.client import LLMClient, LLMError, RetryPolicy
from agent.run.trace import TraceWriter, read_trace
from tests.doubles.openai_server import Fail, Reply, ScriptedOpenAI, ToolCall

SECRET = "sk-test-SECRET-0123456789abcdef"
TOOLS = [{"type": "function", "function": {"name": "search", "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _client(tmp_path, url, sleeps=None, **kw) -> tuple[LLMClient, TraceWriter]:
    trace = TraceWriter(tmp_path / "trace.jsonl")
    settings = Settings(llm_base_url=url, llm_model="m", llm_api_key=SECRET)
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return LLMClient(settings, trace, sleep=sleep, **kw), trace


def test_tool_call_roundtrip_is_traced_and_the_key_stays_out(tmp_path):
    with ScriptedOpenAI([Reply(content="looking", tool_calls=[ToolCall("search", {"pattern": "x"}, id="c1")],
                               prompt_tokens=11, completion_tokens=5)]) as server:
        client, trace = _client(tmp_path, server.base_url)
        answer = client.chat([{"role": "user", "content": "go"}], TOOLS)
    assert answer["content"] == "looking"
    assert answer["tool_calls"] == [{"id": "c1", "type": "function",
                                     "function": {"name": "search", "arguments": '{"pattern": "x"}'}}]
    assert answer["usage"] == {"prompt": 11, "completion": 5, "total": 16}
    sent = server.requests[0]
    assert sent["model"] == "m" and sent["tools"][0]["function"]["name"] == "search"
    auth = {k.lower(): v for k, v in server.headers[0].items()}["authorization"]
    assert auth == f"Bearer {SECRET}"  # the key does reach the endpoint ...
    events = read_trace(trace.path).events
    assert [e["type"] for e in events] == ["llm_request", "llm_response"]
    assert events[1]["usage"]["total"] == 16 and events[1]["message"]["tool_calls"][0]["id"] == "c1"
    assert SECRET not in trace.path.read_text()  # ... and never the trace


def test_streaming_assembles_content_and_tool_call_deltas(tmp_path):
    calls = [ToolCall("search", {"pattern": "speculative_num_steps", "glob": ["*.py"]}, id="a"),
             ToolCall("spec_catalog", "{}", id="b")]
    with ScriptedOpenAI([Reply(content="a longer streamed answer", tool_calls=calls)]) as server:
        client, _ = _client(tmp_path, server.base_url, stream=True)
        answer = client.chat([{"role": "user", "content": "go"}], TOOLS)
    assert server.requests[0]["stream"] is True
    assert answer["content"] == "a longer streamed answer"
    assert [c["function"]["name"] for c in answer["tool_calls"]] == ["search", "spec_catalog"]
    assert answer["tool_calls"][0]["function"]["arguments"] == '{"pattern": "speculative_num_steps", "glob": ["*.py"]}'
    assert answer["tool_calls"][1]["id"] == "b" and answer["usage"]["total"] == 120


def test_429_and_500_are_retried_with_backoff_and_recorded(tmp_path):
    sleeps: list[float] = []
    with ScriptedOpenAI([Fail(429, retry_after="3"), Fail(500), Reply(content="ok")]) as server:
        client, trace = _client(tmp_path, server.base_url, sleeps=sleeps,
                                retry=RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=2.0))
        answer = client.chat([{"role": "user", "content": "go"}], [])
    assert answer["content"] == "ok" and len(server.requests) == 3
    assert sleeps == [2.0, 1.0]  # Retry-After 3 capped at 2.0; then backoff 0.5 * 2
    responses = [e for e in read_trace(trace.path).events if e["type"] == "llm_response"]
    assert [(e["status"], e.get("error")) for e in responses] == [("retry", "HTTP 429"), ("retry", "HTTP 500"),
                                                                  ("ok", None)]


def test_retries_are_bounded(tmp_path):
    with ScriptedOpenAI([], after=Fail(500)) as server:
        client, trace = _client(tmp_path, server.base_url, retry=RetryPolicy(attempts=3))
        with pytest.raises(LLMError, match=r"failed 3 times \(last: HTTP 500\)"):
            client.chat([{"role": "user", "content": "go"}], [])
    assert len(server.requests) == 3
    assert read_trace(trace.path).events[-1]["status"] == "error"


def test_client_error_is_not_retried(tmp_path):
    with ScriptedOpenAI([Fail(401, "bad key")]) as server:
        client, _ = _client(tmp_path, server.base_url)
        with pytest.raises(LLMError, match="HTTP 401.*OPENAI_API_KEY"):
            client.chat([{"role": "user", "content": "go"}], [])
    assert len(server.requests) == 1


def test_endpoint_down_names_the_url_and_the_fix(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client, _ = _client(tmp_path, url, retry=RetryPolicy(attempts=2))
    with pytest.raises(LLMError, match=f"{url} failed 2 times.*start the server or fix --llm-base-url"):
        client.chat([{"role": "user", "content": "go"}], [])


def test_served_model_is_used_when_no_model_is_given(tmp_path):
    with ScriptedOpenAI([Reply(content="hi")], model="deepseek-ai/DeepSeek-V4-Flash") as server:
        settings = Settings(llm_base_url=server.base_url)
        client = LLMClient(settings, TraceWriter(tmp_path / "t.jsonl"))
        client.chat([{"role": "user", "content": "go"}], [])
    assert client.model == "deepseek-ai/DeepSeek-V4-Flash"
    assert server.requests[0]["model"] == "deepseek-ai/DeepSeek-V4-Flash"
