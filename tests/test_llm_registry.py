"""The tool registry over the real tools, and dispatch of model calls (real tools, wheel corpus)."""
from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from agent.campaign.llm.dispatch import dispatch
from agent.campaign.llm.registry import WITHHELD, RegistryError, build_registry
from agent.run.trace import TraceWriter, read_trace
from tools.base import Tool, ToolError


@pytest.fixture(scope="module")
def bindings(sglang_wheel_root):
    root = str(sglang_wheel_root)
    return {"root": root, "sglang_root": root, "package_dir": f"{root}/sglang", "model_path": None,
            "log_files": [], "nvidia_smi": "nvidia-smi", "sglang": root, "sglang_python": "python3",
            "version": "0.5.23"}


class EchoArgs(BaseModel):
    """Echo a word back."""

    word: str = Field(description="The word")
    root: str = Field(description="Bound by the agent")


class Echo(BaseModel):
    word: str
    root: str


def _echo(args: EchoArgs) -> Echo:
    if args.word == "fail":
        raise ToolError("echo failed: say another word")
    if args.word == "crash":
        raise RuntimeError("a bug")
    return Echo(word=args.word, root=args.root)


ECHO = Tool(name="echo", args=EchoArgs, run=_echo)


def test_real_tools_register_with_descriptions_and_bound_context(bindings):
    registry = build_registry(bindings)
    names = set(registry.tools)
    assert {"search", "spec_catalog"} <= names
    assert not names & set(WITHHELD)  # nothing that writes, launches or pulls
    for schema in registry.schemas():
        fn = schema["function"]
        assert fn["description"], fn["name"]
        assert not any(w in fn["name"] for w in ("shell", "exec", "bash", "command"))
        props = fn["parameters"].get("properties", {})
        for bound in registry.tools[fn["name"]].bound:
            assert bound not in props and bound not in fn["parameters"]["required"]
        for prop in props:
            assert prop not in ("root", "package_dir", "sglang_root", "sglang_python", "model_path"), (fn["name"], prop)


def test_missing_modules_are_reported_not_faked(bindings):
    registry = build_registry(bindings, capabilities={"search": (("tools.source.search",), None),
                                                      "telepathy": (("tools.telepathy",), None)})
    assert list(registry.tools) == ["search"]
    assert "tools.telepathy" in registry.missing["telepathy"]


def test_duplicate_names_are_rejected(bindings):
    with pytest.raises(RegistryError, match="two tools are named 'echo'"):
        build_registry(bindings, [("a", ECHO), ("b", Tool(name="echo", args=EchoArgs, run=_echo))], capabilities={})


def test_missing_descriptions_are_rejected(bindings):
    class Vague(BaseModel):
        thing: str

    with pytest.raises(RegistryError, match=r"no docstring; field 'thing' has no description"):
        build_registry(bindings, [("x", Tool(name="vague", args=Vague, run=lambda a: a))], capabilities={})


def test_a_tool_taking_an_unbound_path_is_withheld(bindings):
    class ReadArgs(BaseModel):
        """Read a log."""

        log_path: str = Field(description="Which log")

    registry = build_registry(bindings, [("x", Tool(name="read_log", args=ReadArgs, run=lambda a: a))],
                              capabilities={})
    assert "read_log" not in registry.tools and "log_path" in registry.withheld["read_log"]


def _call(name, arguments, id="c1"):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_dispatch_statuses(tmp_path, bindings):
    trace = TraceWriter(tmp_path / "trace.jsonl")
    registry = build_registry(bindings, [("test", ECHO)], capabilities={})
    ok = dispatch(registry, _call("echo", json.dumps({"word": "hi", "root": "/etc"})), trace)
    assert ok.status == "ok" and '"root": "' + bindings["root"] in ok.text  # the model's root was overridden
    assert "untrusted data from tool echo(" in ok.text
    assert dispatch(registry, _call("echo", '{"word": '), trace).status == "bad_arguments"
    bad = dispatch(registry, _call("echo", '{"wrd": "x"}'), trace)
    assert bad.status == "bad_arguments" and "- word: Field required" in bad.text
    unknown = dispatch(registry, _call("shell", '{"cmd": "rm -rf /"}'), trace)
    assert unknown.status == "unknown_tool" and "Tools you can call: echo, submit_plan" in unknown.text
    failed = dispatch(registry, _call("echo", '{"word": "fail"}'), trace)
    assert failed.status == "error" and "echo failed: say another word" in failed.text
    with pytest.raises(RuntimeError, match="a bug"):
        dispatch(registry, _call("echo", '{"word": "crash"}'), trace)
    results = [e["status"] for e in read_trace(trace.path).events if e["type"] == "tool_result"]
    assert results == ["ok", "bad_arguments", "bad_arguments", "unknown_tool", "error"]


def test_real_search_result_is_quoted_and_capped(tmp_path, bindings):
    trace = TraceWriter(tmp_path / "trace.jsonl")
    registry = build_registry(bindings)
    obs = dispatch(registry, _call("search", json.dumps({"pattern": "speculative", "max_hits": 5000})), trace)
    assert obs.status == "ok"
    assert obs.text.splitlines()[1].startswith("untrusted data from tool search(")
    assert "[cut:" in obs.text and len(obs.text) < 13_000
