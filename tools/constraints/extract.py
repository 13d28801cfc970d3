"""Constraints on speculative settings, read from SGLang's argument hooks (``srt/arg_groups/**``).

Nothing here knows today's rules: ``walker.py`` recognises code shapes (asserts, ``if ...: raise``,
``declare_resolution`` and field assignments, alias returns, auto-parameter tuples) and keeps
every rule's architecture/algorithm scope and the other conditions it sits under. Whether a
condition holds for one configuration is decided later (``condition.py``); a rule whose condition
cannot be decided is reported, never applied.
"""
from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.constraints.callsites import CallSites
from tools.constraints.context import algorithm_dispatch
from tools.constraints.rules import Rule, RuleKind
from tools.constraints.walker import Scope, Walker
from tools.source.confine import outside
from tools.source.pysource import gc_paused, parse_file
from tools.source.research_cache import ResearchScope
from tools.source.search import SearchArgs, search

HOOK_DIRS = ("srt/arg_groups",)
DISPATCHER = "srt/speculative/spec_info.py"

__all__ = ["Rule", "RuleKind", "ExtractConstraintsArgs", "ConstraintsResult", "extract_constraints",
           "EXTRACT_CONSTRAINTS"]


class ExtractConstraintsArgs(BaseModel):
    """Read per-architecture rules on --speculative-* settings from SGLang's argument hooks, each cited."""

    root: str = Field(description="The SGLang source root")
    package_dir: str = Field(description="The sglang/ package folder")
    architecture: str | None = Field(None, description="Keep rules for this architecture (plus general ones)")


class ConstraintsResult(BaseModel):
    rules: list[Rule]
    files_read: int
    warnings: list[str] = Field(default_factory=list)


def extract_constraints(args: ExtractConstraintsArgs, scope: ResearchScope | None = None) -> ConstraintsResult:
    """``scope``: the tree's research cache entry point, when the caller asks more of the same tree."""
    scope = scope or ResearchScope(args.root, args.package_dir)
    return scope.cached("constraints", args, ConstraintsResult, lambda: _parse_heavy(args))


def _parse_heavy(args: ExtractConstraintsArgs) -> ConstraintsResult:
    with gc_paused():  # see tools/source/pysource.py
        return _extract_constraints(args)


def _hook_files(package: Path) -> list[Path]:
    files = [f for d in HOOK_DIRS for f in sorted((package / d).rglob("*.py"))]
    # only files that can hold a rule or an architecture guard are parsed (half the folder, twice as fast)
    relevant = {(package / d / hit.path).resolve() for d in HOOK_DIRS if (package / d).is_dir()
                for hit in search(SearchArgs(pattern=r"speculative_|arch", root=str(package / d), glob=["*.py"],
                                             files_only=True, max_hits=5000)).hits}
    return [f for f in files if f.resolve() in relevant] if relevant else files


def _dispatcher_scopes(package: Path, warnings: list[str]) -> dict[str, set[str]]:
    """handler -> algorithms, from the dispatcher's predicates (``spec_info.py``)."""
    dispatcher = package / DISPATCHER
    if not dispatcher.is_file():
        return {}
    try:
        return algorithm_dispatch(parse_file(dispatcher)[0])
    except SyntaxError as err:
        warnings.append(f"{DISPATCHER}: skipped ({err}); algorithm handlers apply to every algorithm")
        return {}


def _extract_constraints(args: ExtractConstraintsArgs) -> ConstraintsResult:
    package, root = Path(args.package_dir), Path(args.root)
    files = _hook_files(package)
    if not files:
        raise ToolError(f"no argument hooks under {package / HOOK_DIRS[0]}; this is not an SGLang tree "
                        "with srt/arg_groups (pass --sglang PATH to a newer checkout)")
    warnings: list[str] = []
    parsed: list[tuple[str, ast.Module]] = []
    for path in files:
        if outside(root, path):
            warnings.append(f"{path.relative_to(root).as_posix()}: skipped, it resolves outside the source root "
                            "(a symlink); nothing outside the tree is read")
            continue
        try:
            parsed.append((path.relative_to(root).as_posix(), parse_file(path)[0]))
        except (SyntaxError, OSError, ValueError) as err:
            warnings.append(f"{path.relative_to(root).as_posix()}: skipped ({err})")
    trees = [t for _, t in parsed]
    sites = CallSites.build(trees)
    fn_archs = sites.architectures()
    fn_algos = sites.algorithms(_dispatcher_scopes(package, warnings))
    tuple_fields = sites.tuple_fields()
    gates = sites.gates()
    stages = sites.stages(parsed)
    rules: list[Rule] = []
    for rel, tree in parsed:
        walker = Walker(rel, fn_archs, fn_algos, tuple_fields, gates)
        walker.walk(tree.body, Scope())
        rules += walker.rules
    for rule in rules:
        if rule.function in stages:
            rule.stage, rule.stage_step, rule.stage_origin = stages[rule.function]
    if args.architecture:
        rules = [r for r in rules if r.architectures is None or args.architecture in r.architectures]
    return ConstraintsResult(rules=rules, files_read=len(parsed), warnings=warnings)


EXTRACT_CONSTRAINTS = Tool(name="extract_constraints", args=ExtractConstraintsArgs, run=extract_constraints)
