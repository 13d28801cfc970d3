"""The import graph of agent/ and tools/, read with ast: imports go one way (tools/ never imports
agent/, LangGraph or openai) and no modules import each other in a circle, deferred imports
inside functions included. Imports under ``if TYPE_CHECKING:`` never run and are not counted.
Typer's private modules and SQL on LangGraph's tables each stay in one module."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "tools")
TOOLS_NEVER_IMPORT = ("agent", "langgraph", "openai")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imported(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute names, ours and others'), at any depth."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                visit(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = ".".join(package[:len(package) - child.level + 1] + [child.module or ""]) if child.level \
                    else child.module
                base = base.strip(".")
                # `from pkg import submodule` imports the submodule; `from pkg import name`, the package
                subs = {f"{base}.{alias.name}" for alias in child.names} & MODULES.keys()
                found.update(subs or {base})
                if len(subs) < len(child.names):
                    found.add(base)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def ours(target: str) -> str | None:
    """The module of ours that importing ``target`` names (a name inside one resolves to it)."""
    parts = target.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) or None


def graph() -> dict[str, set[str]]:
    edges = {}
    for name, path in MODULES.items():
        targets = {ours(t) for t in imported(name, path)}
        # a submodule's own packages run before it; naming them is not an edge back
        edges[name] = {t for t in targets if t and t != name and not name.startswith(t + ".")}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read():
    edges = graph()
    assert "tools.recipes.values" in edges["tools.recipes.calls"]
    assert "agent.run.trace_read" in edges["agent.run.trace"]
    assert "agent.run.trace_schema" in edges["agent.run.trace_read"]  # a deferred import inside a function counts


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
