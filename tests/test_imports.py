"""The import graph of agent/ and tools/ (tests/import_graph.py): imports go one way (tools/ never
imports agent/, LangGraph or openai; no module imports a layer above its own) and no modules import each
other in a circle, deferred imports inside functions and imports under ``if TYPE_CHECKING:`` included.
Typer's private modules and SQL on LangGraph's tables each stay in one module."""
from __future__ import annotations

import ast
import re

from tests.import_graph import (GROUND_MODULES, MODULES, ROOT, circles, climbs, graph, imported, layer_of, shared_names,
                                top_level)

TOOLS_NEVER_IMPORT = ("agent", "langgraph", "openai")


def test_the_graph_is_read():
    edges = graph()
    assert "tools.recipes.values" in edges["tools.recipes.calls"]
    assert "agent.run.trace_read" in edges["agent.run.trace"]
    assert "agent.run.trace_schema" in edges["agent.run.trace_read"]  # a deferred import inside a function counts
    assert "agent.terminal.live" in edges["agent.campaign.runtime"]  # so does one under TYPE_CHECKING


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    found = circles(graph())
    assert not found, f"modules that import each other in a circle: {found}"


def test_tools_never_import_agent_langgraph_or_openai():
    wrong = {name: sorted(t for t in imported(name, path) if t.split(".")[0] in TOOLS_NEVER_IMPORT)
             for name, path in MODULES.items() if name.startswith("tools")}
    wrong = {name: targets for name, targets in wrong.items() if targets}
    assert not wrong, f"tools/ imports what it must not (agent/, langgraph, openai): {wrong}"


# What an upgrade of typer or LangGraph can break lives behind one module each, pinned by its own test
# (tests/test_typer_internals.py, tests/test_checkpoints.py).
PRIVATE_IMPORTS = {"typer._": "agent.commands.typer_internals"}
LANGGRAPH_SQL = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE)\s+(?:checkpoints|writes)\b", re.IGNORECASE)


def test_typers_private_api_is_imported_by_one_module():
    for prefix, owner in PRIVATE_IMPORTS.items():
        users = sorted(name for name, path in MODULES.items() if any(t.startswith(prefix) for t in imported(name, path)))
        assert users == [owner], f"{prefix}* imported outside {owner}: {users}"


def test_langgraphs_tables_are_queried_by_one_module():
    users = sorted(name for name, path in MODULES.items()
                   if any(isinstance(node, ast.Constant) and isinstance(node.value, str) and LANGGRAPH_SQL.search(node.value)
                          for node in ast.walk(ast.parse(path.read_text()))))
    assert users == ["agent.campaign.checkpoints"], f"SQL on LangGraph's checkpoint tables outside agent/campaign/checkpoints.py: {users}"


def test_every_module_has_a_layer():
    missing = sorted(name for name in MODULES if layer_of(name) is None)
    assert not missing, f"modules no layer of tests/import_graph.py:LAYERS names (add them there): {missing}"


def test_the_climb_finder_finds_a_climb():
    assert layer_of("agent.commands.main") > layer_of("agent.campaign.runtime") > layer_of("agent.run.trace") \
        > layer_of("tools.base")
    assert climbs({"agent.run.trace": frozenset({"agent.commands.main", "tools.base"})}) == \
        ["agent.run.trace -> agent.commands.main"]


def test_no_import_climbs_a_layer():
    found = climbs(graph())
    assert not found, f"imports from a layer to one above it (tests/import_graph.py:LAYERS): {found}"


def test_agents_top_level_holds_package_faces_and_ground_modules():
    loose = top_level("agent")
    assert len(loose) <= GROUND_MODULES, f"agent/ holds {len(loose)} modules beside its packages: {loose}"


def test_no_two_modules_of_agent_share_a_name():
    shared = shared_names("agent")
    assert not shared, f"modules of agent/ that share a file name: {shared}"


def test_no_test_module_imports_another():
    """What tests share lives in tests/ helper modules (fixtures, builders), never in a test module."""
    tests = ROOT / "tests"
    found = []
    for path in sorted(tests.rglob("*.py")):
        if {"fixtures", "golden"} & set(path.relative_to(tests).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                re.findall(r"(?:from|import) (tests\.test_\w+)", node.value) if isinstance(node, ast.Constant) and \
                isinstance(node.value, str) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("tests.test_")]
    assert not found, f"test modules imported by others (move what they share to a helper module): {found}"
