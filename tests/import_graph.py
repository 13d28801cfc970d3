"""The import graph of agent/ and tools/, read with ast, and the numbers of its shape.

Every import counts: at the top, inside functions and under ``if TYPE_CHECKING:`` (a type checker
follows those too, and a circle through one is still a circle a reader must untangle). The layers
(lowest first) are the order imports may go: a module imports its own layer or one below, never one
above. tests/test_imports.py holds the graph to that; ``python -m tests.import_graph`` prints the numbers
(modules at agent/'s top level, circles, imports that climb, largest package, deepest chain).
"""
from __future__ import annotations

import ast
import sys
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "tools")

# Lowest first; a module belongs to the first entry naming it or a folder above it (paths, not dotted names).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tools/__init__", "tools/base", "tools/defaults", "tools/child_env", "tools/json_data", "tools/markdown",
     "tools/state_dir", "tools/stop"),              # tools/' ground: what every capability shares
    ("tools/gpus",),
    ("tools/gpu_choice",),
    ("tools/source",),
    ("tools/checkpoint", "tools/constraints", "tools/recipes"),
    ("tools/jobs",),
    ("tools/scripts",),
    ("tools/measure",),
    ("tools/mtp",),
    ("tools/sync", "tools/tuning"),
    ("agent/__init__", "agent/secrets", "agent/exit_codes"),  # agent/'s ground: the version, redaction, exit codes
    ("agent/terminal",),                            # what reaches a person
    ("agent/settings",),                            # what the user asked for
    ("agent/run",),                                 # one run on disk
    ("agent/report",),                              # built from a run folder alone
    ("agent/steps",),                               # the adapters between lanes and tools
    ("agent/campaign",),                            # driving one campaign (its LLM part included)
    ("agent/replay",),                              # re-driving a recorded campaign
    ("agent/commands",),                            # the command line
)
GROUND_MODULES = 2  # agent/'s top level holds package faces and at most this many modules


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imported(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (absolute names, ours and others'), at any depth."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]) if node.level \
                else node.module
            base = base.strip(".")
            # `from pkg import submodule` imports the submodule; `from pkg import name`, the package
            subs = {f"{base}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(subs or {base})
            if len(subs) < len(node.names):
                found.add(base)
    return found


def ours(target: str) -> str | None:
    """The module of ours that importing ``target`` names (a name inside one resolves to it)."""
    parts = target.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) or None


@cache
def graph() -> dict[str, frozenset[str]]:
    edges = {}
    for name, path in MODULES.items():
        targets = {ours(t) for t in imported(name, path)}
        # a submodule's own packages run before it; naming them is not an edge back
        edges[name] = frozenset(t for t in targets if t and t != name and not name.startswith(t + "."))
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


def layer_of(name: str) -> int | None:
    """The index in LAYERS of the module ``name`` (None: no layer names it)."""
    path = "/".join(name.split(".")) + ("/__init__" if MODULES[name].name == "__init__.py" else "")
    for rank, members in enumerate(LAYERS):
        if any(path == m or path.startswith(m + "/") for m in members):
            return rank
    return None


def climbs(edges: dict[str, frozenset[str]]) -> list[str]:
    """Imports from a layer to one above it."""
    return sorted(f"{name} -> {target}" for name, targets in edges.items() for target in targets
                  if None not in (layer_of(name), layer_of(target)) and layer_of(target) > layer_of(name))


def top_level(package: str = "agent") -> list[str]:
    """The modules directly in ``package``/ (package faces not counted)."""
    return sorted(p.stem for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")


def shared_names(package: str = "agent") -> dict[str, list[str]]:
    """File names (not package faces) that two modules under ``package``/ share."""
    names = Counter(p.name for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py")
    return {n: sorted(str(p.relative_to(ROOT)) for p in (ROOT / package).rglob(n)) for n, c in names.items() if c > 1}


def deepest_chain(edges: dict[str, frozenset[str]], within: str = "agent") -> list[str]:
    """The longest import chain among ``within``'s modules (the graph has no circle)."""
    longest: dict[str, list[str]] = {}

    def chain(name: str) -> list[str]:
        if name not in longest:
            longest[name] = [name]  # a guard should a circle appear
            below = [chain(t) for t in sorted(edges[name]) if t.split(".")[0] == within]
            longest[name] = [name, *max(below, key=len, default=[])]
        return longest[name]

    return max((chain(n) for n in sorted(edges) if n.split(".")[0] == within), key=len)


def numbers() -> dict[str, object]:
    edges = graph()
    sizes = Counter(".".join(n.split(".")[:2]) for n in MODULES if n.startswith("agent.") and
                    MODULES[n].parent != ROOT / "agent")
    package, size = sizes.most_common(1)[0]
    chain = deepest_chain(edges)
    return {"modules at agent/'s top level": len(top_level()), "they are": top_level(),
            "import circles": len(circles(edges)), "imports that climb": len(climbs(edges)),
            "largest package": f"{package} ({size} modules)", "deepest chain": f"{len(chain)} modules: " +
            " -> ".join(chain), "file names two modules of agent/ share": sorted(shared_names())}


if __name__ == "__main__":
    for key, value in numbers().items():
        sys.stdout.write(f"{key}: {value}\n")
