"""Constraints on speculative settings, read from SGLang's argument hooks (``srt/arg_groups/**``).

Nothing here knows today's rules. We walk every function of the hook files with the stack of
``if`` tests around each statement and recognise shapes: ``assert cfg.speculative_algorithm in
(...)`` (allowed algorithms), ``assert cfg.speculative_eagle_topk == 1`` and ``if ...: raise``
(required values, forbidden combinations), ``declare_resolution(..., speculative_draft_model_path=
cfg.model_path)`` under an architecture list (draft-path fallback), the topk-1 rewrite of draft
tokens, ``return "EAGLE"`` under ``== "NEXTN"`` (aliases), tuples returned per architecture by the
auto-parameter chooser, and the all-or-none assert on steps/topk/draft tokens. Each rule keeps its
file:line and the conditions it sits under; rules under conditions we cannot decide statically
are reported with that condition and are not enforced.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.constraints.context import (
    algorithm_dispatch, algorithm_test, arch_test, calls_under_arch_guards, field_of, strings, tuple_field_names,
)
from tools.source.origin import Origin
from tools.source.pysource import gc_paused, parse_file
from tools.source.search import SearchArgs, search

HOOK_DIRS = ("srt/arg_groups",)
DISPATCHER = "srt/speculative/spec_info.py"
RuleKind = Literal["allowed_algorithms", "requires", "forbids", "alias", "draft_path_fallback",
                   "auto_default", "all_or_none", "topk1_draft_tokens", "default"]


class Rule(BaseModel):
    kind: RuleKind
    rule: str = Field(description="The rule in words, with its scope")
    architectures: list[str] | None = Field(None, description="None = every architecture")
    algorithms: list[str] | None = Field(None, description="None = every algorithm")
    excluded_architectures: list[str] = Field(default_factory=list, description="Not for these (else branches)")
    excluded_algorithms: list[str] = Field(default_factory=list, description="Not for these (else / early return)")
    field: str | None = None
    values: list[str] = Field(default_factory=list, description="Allowed values / alias target / defaults")
    condition: str | None = Field(None, description="Other conditions, as written; rules with one are not enforced")
    literal: bool = Field(False, description="values are constants from the source (checkable), not expressions")
    function: str
    origin: Origin

    def applies(self, architecture: str | None, algorithm: str | None) -> bool:
        arch_ok = self.architectures is None or (architecture is not None and architecture in self.architectures)
        arch_ok = arch_ok and architecture not in self.excluded_architectures
        algo_ok = self.algorithms is None or algorithm is None or algorithm in self.algorithms
        algo_ok = algo_ok and (algorithm is None or algorithm not in self.excluded_algorithms)
        return arch_ok and algo_ok


class ExtractConstraintsArgs(BaseModel):
    """Read per-architecture rules on --speculative-* settings from SGLang's argument hooks, each cited."""

    root: str = Field(description="The SGLang source root")
    package_dir: str = Field(description="The sglang/ package folder")
    architecture: str | None = Field(None, description="Keep rules for this architecture (plus general ones)")


class ConstraintsResult(BaseModel):
    rules: list[Rule]
    files_read: int
    warnings: list[str] = Field(default_factory=list)


@dataclass
class _Scope:
    archs: list[str] | None = None
    algos: list[str] | None = None
    conditions: list[str] = dc_field(default_factory=list)
    tests: list[ast.AST] = dc_field(default_factory=list)
    not_archs: list[str] = dc_field(default_factory=list)
    not_algos: list[str] = dc_field(default_factory=list)


def _message(node: ast.AST | None) -> str:
    if node is None:
        return ""
    text = next((n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)), "")
    return f' ("{text.strip()[:120]}")' if text else ""


def _values(node: ast.AST) -> tuple[list[str], bool]:
    """Constants of ``1`` / ``"EAGLE"`` / ``(None, 1)`` as strings, and whether they all were constants."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    if all(isinstance(e, ast.Constant) for e in elements):
        return [str(e.value) for e in elements], True  # type: ignore[attr-defined]
    return [ast.unparse(node)], False


class _Walker:
    def __init__(self, rel: str, fn_archs: dict[str, set[str]], fn_algos: dict[str, set[str]],
                 tuple_fields: dict[str, list[str]]):
        self.rel, self.fn_archs, self.fn_algos, self.tuple_fields = rel, fn_archs, fn_algos, tuple_fields
        self.rules: list[Rule] = []
        self.function = ""

    def add(self, kind: RuleKind, text: str, scope: _Scope, node: ast.AST, field: str | None = None,
            values: list[str] | None = None, literal: bool = False) -> None:
        where = [f"architecture in {scope.archs}" if scope.archs else "",
                 f"algorithm in {scope.algos}" if scope.algos else "",
                 f"architecture not in {scope.not_archs}" if scope.not_archs else "",
                 f"algorithm not in {scope.not_algos}" if scope.not_algos else "",
                 f"when {' and '.join(scope.conditions)}" if scope.conditions else ""]
        suffix = "; ".join(w for w in where if w)
        self.rules.append(Rule(kind=kind, rule=text + (f" [{suffix}]" if suffix else ""), architectures=scope.archs,
                               algorithms=scope.algos, field=field, values=values or [],
                               literal=literal, excluded_architectures=scope.not_archs, excluded_algorithms=scope.not_algos,
                               condition=" and ".join(scope.conditions) or None, function=self.function,
                               origin=Origin(path=self.rel, line=node.lineno)))

    def function_scope(self, node: ast.FunctionDef) -> _Scope:
        archs = self.fn_archs.get(node.name)
        algos = self.fn_algos.get(node.name)
        return _Scope(sorted(archs) if archs else None, sorted(algos) if algos else None)

    def walk(self, body: list[ast.stmt], scope: _Scope) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], ast.Return):
                # ``if X: return`` guards the rest of the body: what follows holds only when not X
                self.walk(stmt.body, self.narrow(scope, stmt.test))
                scope = self.narrow(scope, stmt.test, is_else=True)
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                outer, self.function = self.function, stmt.name
                self.walk(stmt.body, self.function_scope(stmt))  # type: ignore[arg-type]
                self.function = outer
            elif isinstance(stmt, ast.ClassDef):
                self.walk(stmt.body, scope)
            elif isinstance(stmt, ast.If):
                self.walk(stmt.body, self.narrow(scope, stmt.test))
                if stmt.orelse:
                    self.walk(stmt.orelse, self.narrow(scope, stmt.test, is_else=True))
                if any(isinstance(s, ast.Raise) for s in stmt.body):
                    self.raise_rule(stmt, scope)
            elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                self.walk(stmt.body, scope)
            else:
                self.statement(stmt, scope)

    def narrow(self, scope: _Scope, test: ast.AST, is_else: bool = False) -> _Scope:
        archs, algos = arch_test(test), algorithm_test(test)
        new = _Scope(scope.archs, scope.algos, list(scope.conditions), [*scope.tests, test],
                     list(scope.not_archs), list(scope.not_algos))
        if is_else:
            if archs is not None:
                new.not_archs = sorted(set(new.not_archs) | set(archs))
            elif algos is not None:
                new.not_algos = sorted(set(new.not_algos) | set(algos))
            elif not _benign(test):
                new.conditions.append(f"not ({ast.unparse(test)})")
            return new
        if archs is not None:
            new.archs = sorted(set(archs) & set(scope.archs)) if scope.archs else archs
        elif algos is not None:
            new.algos = sorted(set(algos) & set(scope.algos)) if scope.algos else algos
        elif not _benign(test):
            new.conditions.append(ast.unparse(test))
        return new

    def statement(self, stmt: ast.stmt, scope: _Scope) -> None:
        if isinstance(stmt, ast.Assert):
            self.assert_rule(stmt, scope)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            self.return_rule(stmt, scope)
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            if "declare_resolution" in ast.unparse(call.func):
                self.declaration(call, scope)

    def assert_rule(self, stmt: ast.Assert, scope: _Scope) -> None:
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and (name := field_of(test.left)):
            values, literal = _values(test.comparators[0])
            if name == "speculative_algorithm" and isinstance(test.ops[0], ast.In):
                self.add("allowed_algorithms", f"only {', '.join(values)} allowed{_message(stmt.msg)}",
                         scope, stmt, name, values, literal)
            elif isinstance(test.ops[0], (ast.Eq, ast.In)):
                self.add("requires", f"{name} must be {' or '.join(values)}{_message(stmt.msg)}",
                         scope, stmt, name, values, literal)
        elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            nulls = [field_of(v.left) for v in test.values if isinstance(v, ast.Compare)
                     and isinstance(v.ops[0], ast.Is) and field_of(v.left)]
            guard = [field_of(t.left) for t in scope.tests if isinstance(t, ast.Compare) and field_of(t.left)]
            guard += [field_of(v.left) for t in scope.tests if isinstance(t, ast.BoolOp)
                      for v in t.values if isinstance(v, ast.Compare) and field_of(v.left)]
            if nulls and len(nulls) == len(test.values) and guard:
                fields = [g for g in guard if g] + [n for n in nulls if n]
                plain = _Scope(scope.archs, scope.algos, not_archs=scope.not_archs, not_algos=scope.not_algos, conditions=[c for c in scope.conditions
                                                           if not any(f in c for f in fields)])
                self.add("all_or_none", f"{', '.join(fields)} must be given all together or not at all "
                         f"(when {guard[-1]} is unset the others must be unset too)", plain, stmt, None, fields)

    def raise_rule(self, stmt: ast.If, scope: _Scope) -> None:
        test = stmt.test
        raised = next(s for s in stmt.body if isinstance(s, ast.Raise))
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and (name := field_of(test.left)):
            op, right = test.ops[0], test.comparators[0]
            values, literal = _values(right)
            if isinstance(op, ast.NotIn) or isinstance(op, ast.NotEq):
                allowed = [v for v in values if v != "None"]
                self.add("requires", f"{name} must be {' or '.join(allowed)}{_message(raised.exc)}",
                         scope, stmt, name, allowed, literal)
                return
            relation = {ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.In: "in"}.get(type(op))
            if relation:
                self.add("forbids", f"{name} {relation} {', '.join(values)} is rejected{_message(raised.exc)}",
                         scope, stmt, name, values, literal)
        elif any(field_of(n) for n in ast.walk(test)):
            self.add("forbids", f"rejected when {ast.unparse(test)}{_message(raised.exc)}", scope, stmt)

    def return_rule(self, stmt: ast.Return, scope: _Scope) -> None:
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            sources = [a for t in scope.tests for a in (algorithm_test(t) or _name_equals(t) or [])]
            aliases = [s for s in sources if s != value.value]
            if aliases:
                self.add("alias", f"{', '.join(aliases)} is resolved to {value.value}", scope, stmt,
                         "speculative_algorithm", [value.value] + aliases)
        elif isinstance(value, ast.Tuple) and value.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, int) for e in value.elts):
            numbers = [str(e.value) for e in value.elts]  # type: ignore[attr-defined]
            fields = self.tuple_fields.get(self.function) or [f"value{i}" for i in range(len(numbers))]
            pairs = ", ".join(f"{f}={n}" for f, n in zip(fields, numbers))
            self.add("auto_default", f"when unset, chosen automatically: {pairs}", scope, stmt,
                     None, [f"{f}={n}" for f, n in zip(fields, numbers)])

    def declaration(self, call: ast.Call, scope: _Scope) -> None:
        for keyword in call.keywords:
            if not keyword.arg or not keyword.arg.startswith("speculative_"):
                continue
            text = ast.unparse(keyword.value)
            if keyword.arg == "speculative_draft_model_path" and text.endswith("model_path"):
                plain = _Scope(scope.archs, scope.algos, not_archs=scope.not_archs, not_algos=scope.not_algos, conditions=[c for c in scope.conditions
                                                           if "speculative_draft_model_path" not in c])
                self.add("draft_path_fallback", "the draft model path falls back to the target model "
                         "(no --speculative-draft-model-path needed)", plain, call, keyword.arg, [text])
            elif keyword.arg == "speculative_num_draft_tokens" and "speculative_num_steps" in text and "+" in text \
                    and any("speculative_eagle_topk == 1" in ast.unparse(t) for t in scope.tests):
                plain = _Scope(scope.archs, scope.algos, not_archs=scope.not_archs, not_algos=scope.not_algos, conditions=[c for c in scope.conditions
                                                           if "speculative_eagle_topk == 1" not in c])
                self.add("topk1_draft_tokens", f"with topk 1, speculative_num_draft_tokens is set to {text}",
                         plain, call, keyword.arg, [text])
            else:
                self.add("default", f"{keyword.arg} is set to {text}", scope, call, keyword.arg, [text])


def _name_equals(test: ast.AST) -> list[str] | None:
    """``speculative_algorithm == "NEXTN" or ... == "EAGLE"`` on a plain local name."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_name_equals(v) for v in test.values]
        return [a for p in parts for a in p] if all(parts) else None
    if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Eq) and "algorithm" in ast.unparse(test.left):
        return strings(test.comparators[0])
    return None


def _benign(test: ast.AST) -> bool:
    """``speculative_algorithm is not None``: just 'speculation is on', not a restriction."""
    return isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.IsNot) and \
        field_of(test.left) == "speculative_algorithm"


def extract_constraints(args: ExtractConstraintsArgs) -> ConstraintsResult:
    with gc_paused():  # parse-heavy: see tools/source/pysource.py
        return _extract_constraints(args)


def _extract_constraints(args: ExtractConstraintsArgs) -> ConstraintsResult:
    package, root = Path(args.package_dir), Path(args.root)
    files = [f for d in HOOK_DIRS for f in sorted((package / d).rglob("*.py"))]
    # only files that can hold a rule or an architecture guard are parsed (half the folder, twice as fast)
    relevant = {(package / d / hit.path).resolve() for d in HOOK_DIRS if (package / d).is_dir()
                for hit in search(SearchArgs(pattern=r"speculative_|arch", root=str(package / d), glob=["*.py"],
                                             files_only=True, max_hits=5000)).hits}
    files = [f for f in files if f.resolve() in relevant] if relevant else files
    if not files:
        raise ToolError(f"no argument hooks under {package / HOOK_DIRS[0]}; this is not an SGLang tree "
                        "with srt/arg_groups (pass --sglang PATH to a newer checkout)")
    warnings: list[str] = []
    parsed: list[tuple[str, ast.Module]] = []
    for path in files:
        try:
            parsed.append((path.relative_to(root).as_posix(), parse_file(path)[0]))
        except (SyntaxError, OSError, ValueError) as err:
            warnings.append(f"{path.relative_to(root).as_posix()}: skipped ({err})")
    trees = [t for _, t in parsed]
    fn_archs = calls_under_arch_guards(trees)
    dispatcher = package / DISPATCHER
    fn_algos: dict[str, set[str]] = {}
    if dispatcher.is_file():
        try:
            fn_algos = algorithm_dispatch(parse_file(dispatcher)[0])
        except SyntaxError as err:
            warnings.append(f"{DISPATCHER}: skipped ({err}); algorithm handlers apply to every algorithm")
    tuple_fields = tuple_field_names(trees)
    rules: list[Rule] = []
    for rel, tree in parsed:
        walker = _Walker(rel, fn_archs, fn_algos, tuple_fields)
        walker.walk(tree.body, _Scope())
        rules += walker.rules
    if args.architecture:
        rules = [r for r in rules if r.architectures is None or args.architecture in r.architectures]
    return ConstraintsResult(rules=rules, files_read=len(parsed), warnings=warnings)


EXTRACT_CONSTRAINTS = Tool(name="extract_constraints", args=ExtractConstraintsArgs, run=extract_constraints)
