"""The walk over one hook file that turns code shapes into rules, each with the tests it sits under.

Every function is walked with the stack of ``if`` tests around each statement. Tests on the
architecture or the algorithm narrow the rule's scope; any other test becomes one of its
``tests`` (the rule applies only where they hold). Shapes recognised: ``assert cfg.field in/==
...`` and ``if ...: raise`` (checks, with the expression under which SGLang rejects the settings),
``declare_resolution(..., field=...)`` and plain ``server_args.field = ...`` assignments (the
draft-path fallback, the topk-1 draft-token rewrite, other defaults), ``return "EAGLE"`` under
``== "NEXTN"`` (aliases), integer tuples returned by an auto-parameter chooser, and the
all-or-none assert on steps/topk/draft tokens.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field as dc_field

from tools.constraints.condition import Binding, names_in
from tools.constraints.context import algorithm_test, arch_test, field_of, strings
from tools.constraints.rules import Rule, RuleKind
from tools.source.origin import Origin

UNKNOWN_VALUE = "__unknown__"  # a value the walker cannot name (tuple unpacking, loop state): never decidable


@dataclass
class Scope:
    archs: list[str] | None = None
    algos: list[str] | None = None
    conditions: list[str] = dc_field(default_factory=list)
    tests: list[ast.AST] = dc_field(default_factory=list)
    not_archs: list[str] = dc_field(default_factory=list)
    not_algos: list[str] = dc_field(default_factory=list)

    def without(self, text: str) -> "Scope":
        """The same scope minus the conditions (or the ``and``-parts of one) that mention ``text``: a
        rule that restates its own guard (``if draft is None: draft = model_path``) keeps the rest."""
        kept = [part for c in self.conditions if (part := _drop_parts(c, text))]
        return Scope(self.archs, self.algos, kept, list(self.tests), list(self.not_archs), list(self.not_algos))


def _drop_parts(condition: str, text: str) -> str:
    if text not in condition:
        return condition
    node = ast.parse(condition, mode="eval").body
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        parts = [ast.unparse(v) for v in node.values if text not in ast.unparse(v)]
        return " and ".join(f"({p})" if " or " in p else p for p in parts)
    return ""


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


def local_assignments(fn: ast.FunctionDef) -> dict[str, list[tuple[int, Binding]]]:
    """name -> (line, assignment) for every local name a function assigns, with the tests around it."""
    found: dict[str, list[tuple[int, Binding]]] = {}

    def bind(target: ast.AST, value: str, line: int, tests: list[str]) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append((line, Binding(tests=list(tests), value=value)))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                bind(element, UNKNOWN_VALUE, line, tests)

    def visit(body: list[ast.stmt], tests: list[str]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    bind(target, ast.unparse(stmt.value), stmt.lineno, tests)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                bind(stmt.target, ast.unparse(stmt.value), stmt.lineno, tests)
            elif isinstance(stmt, (ast.AugAssign, ast.For, ast.AsyncFor)):
                bind(stmt.target, UNKNOWN_VALUE, stmt.lineno, tests)
            if isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                visit(stmt.body, [*tests, test])
                visit(stmt.orelse, [*tests, f"not ({test})"])
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                visit(stmt.body, [*tests, UNKNOWN_VALUE])
                visit(stmt.orelse, [*tests, UNKNOWN_VALUE])
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                visit(stmt.body, tests)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body, tests)
                for handler in stmt.handlers:
                    visit(handler.body, [*tests, UNKNOWN_VALUE])
                visit(stmt.orelse, tests)
                visit(stmt.finalbody, tests)
    visit(fn.body, [])
    return found


class Walker:
    def __init__(self, rel: str, fn_archs: dict[str, set[str]], fn_algos: dict[str, set[str]],
                 tuple_fields: dict[str, list[str]], gates: dict[str, str] | None = None):
        self.rel, self.fn_archs, self.fn_algos, self.tuple_fields = rel, fn_archs, fn_algos, tuple_fields
        self.gates = gates or {}
        self.rules: list[Rule] = []
        self.function = ""
        self.locals: dict[str, list[tuple[int, Binding]]] = {}

    def add(self, kind: RuleKind, text: str, scope: Scope, node: ast.AST, field: str | None = None,
            values: list[str] | None = None, literal: bool = False, trigger: str | None = None) -> None:
        where = [f"architecture in {scope.archs}" if scope.archs else "",
                 f"algorithm in {scope.algos}" if scope.algos else "",
                 f"architecture not in {scope.not_archs}" if scope.not_archs else "",
                 f"algorithm not in {scope.not_algos}" if scope.not_algos else "",
                 f"when {' and '.join(scope.conditions)}" if scope.conditions else ""]
        suffix = "; ".join(w for w in where if w)
        tests = list(scope.conditions)
        self.rules.append(Rule(kind=kind, rule=text + (f" [{suffix}]" if suffix else ""), architectures=scope.archs,
                               algorithms=scope.algos, field=field, values=values or [], literal=literal,
                               excluded_architectures=scope.not_archs, excluded_algorithms=scope.not_algos,
                               condition=" and ".join(tests) or None, tests=tests,
                               bindings=self.bindings([*tests, trigger or ""], node.lineno), trigger=trigger,
                               gate=self.gates.get(self.function),
                               function=self.function, origin=Origin(path=self.rel, line=node.lineno)))

    def bindings(self, texts: list[str], line: int) -> dict[str, list[Binding]]:
        """The assignments before ``line`` to the local names the texts use, and to the names those use."""
        found: dict[str, list[Binding]] = {}
        pending = [n for t in texts if t for n in names_in(t)]
        while pending:
            name = pending.pop()
            if name in found or name not in self.locals:
                continue
            found[name] = [b for at, b in self.locals[name] if at < line]
            pending += [n for b in found[name] for t in (*b.tests, b.value) for n in names_in(t)]
        return {k: v for k, v in found.items() if v}

    def function_scope(self, node: ast.FunctionDef) -> Scope:
        archs = self.fn_archs.get(node.name)
        algos = self.fn_algos.get(node.name)
        return Scope(sorted(archs) if archs else None, sorted(algos) if algos else None)

    def walk(self, body: list[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], ast.Return):
                # ``if X: return`` guards the rest of the body: what follows holds only when not X
                self.walk(stmt.body, self.narrow(scope, stmt.test))
                scope = self.narrow(scope, stmt.test, is_else=True)
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                outer = self.function, self.locals
                self.function, self.locals = stmt.name, local_assignments(stmt)  # type: ignore[arg-type]
                self.walk(stmt.body, self.function_scope(stmt))  # type: ignore[arg-type]
                self.function, self.locals = outer
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

    def narrow(self, scope: Scope, test: ast.AST, is_else: bool = False) -> Scope:
        archs, algos = arch_test(test), algorithm_test(test)
        new = Scope(scope.archs, scope.algos, list(scope.conditions), [*scope.tests, test],
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

    def statement(self, stmt: ast.stmt, scope: Scope) -> None:
        if isinstance(stmt, ast.Assert):
            self.assert_rule(stmt, scope)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            self.return_rule(stmt, scope)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
                and (name := field_of(stmt.targets[0])):
            self.setting(name, stmt.value, stmt, scope)  # server_args.speculative_x = ... (older hooks)
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            if "declare_resolution" in ast.unparse(call.func):
                for keyword in call.keywords:
                    if keyword.arg and keyword.arg.startswith("speculative_"):
                        self.setting(keyword.arg, keyword.value, call, scope)

    def assert_rule(self, stmt: ast.Assert, scope: Scope) -> None:
        test = stmt.test
        trigger = f"not ({ast.unparse(test)})"
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and (name := field_of(test.left)):
            values, literal = _values(test.comparators[0])
            if name == "speculative_algorithm" and isinstance(test.ops[0], ast.In):
                self.add("allowed_algorithms", f"only {', '.join(values)} allowed{_message(stmt.msg)}",
                         scope, stmt, name, values, literal, trigger)
            elif isinstance(test.ops[0], (ast.Eq, ast.In)):
                self.add("requires", f"{name} must be {' or '.join(values)}{_message(stmt.msg)}",
                         scope, stmt, name, values, literal, trigger)
        elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            nulls = [field_of(v.left) for v in test.values if isinstance(v, ast.Compare)
                     and isinstance(v.ops[0], ast.Is) and field_of(v.left)]
            guard = [field_of(t.left) for t in scope.tests if isinstance(t, ast.Compare) and field_of(t.left)]
            guard += [field_of(v.left) for t in scope.tests if isinstance(t, ast.BoolOp)
                      for v in t.values if isinstance(v, ast.Compare) and field_of(v.left)]
            if nulls and len(nulls) == len(test.values) and guard:
                fields = [g for g in guard if g] + [n for n in nulls if n]
                plain = Scope(scope.archs, scope.algos, [c for c in scope.conditions if not any(f in c for f in fields)],
                              not_archs=scope.not_archs, not_algos=scope.not_algos)
                self.add("all_or_none", f"{', '.join(fields)} must be given all together or not at all "
                         f"(when {guard[-1]} is unset the others must be unset too)", plain, stmt, None, fields)

    def raise_rule(self, stmt: ast.If, scope: Scope) -> None:
        test = stmt.test
        raised = next(s for s in stmt.body if isinstance(s, ast.Raise))
        trigger = ast.unparse(test)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and (name := field_of(test.left)):
            op, right = test.ops[0], test.comparators[0]
            values, literal = _values(right)
            if isinstance(op, (ast.NotIn, ast.NotEq)):
                allowed = [v for v in values if v != "None"]
                self.add("requires", f"{name} must be {' or '.join(allowed)}{_message(raised.exc)}",
                         scope, stmt, name, allowed, literal, trigger)
                return
            relation = {ast.Gt: ">", ast.Lt: "<", ast.Eq: "==", ast.In: "in"}.get(type(op))
            if relation:
                self.add("forbids", f"{name} {relation} {', '.join(values)} is rejected{_message(raised.exc)}",
                         scope, stmt, name, values, literal, trigger)
        elif any(field_of(n) for n in ast.walk(test)):
            self.add("forbids", f"rejected when {trigger}{_message(raised.exc)}", scope, stmt, trigger=trigger)

    def return_rule(self, stmt: ast.Return, scope: Scope) -> None:
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
            pairs = ", ".join(f"{f}={n}" for f, n in zip(fields, numbers, strict=False))
            self.add("auto_default", f"when unset, chosen automatically: {pairs}", scope, stmt,
                     None, [f"{f}={n}" for f, n in zip(fields, numbers, strict=False)])

    def setting(self, name: str, value: ast.AST, node: ast.AST, scope: Scope) -> None:
        """A hook sets a field: through ``declare_resolution(field=...)`` or by assignment."""
        text = ast.unparse(value)
        if name == "speculative_draft_model_path" and text.endswith("model_path"):
            self.add("draft_path_fallback", "the draft model path falls back to the target model "
                     "(no --speculative-draft-model-path needed)", scope.without(name), node, name, [text])
        elif name == "speculative_num_draft_tokens" and "speculative_num_steps" in text and "+" in text \
                and any("speculative_eagle_topk == 1" in ast.unparse(t) for t in scope.tests):
            self.add("topk1_draft_tokens", f"with topk 1, speculative_num_draft_tokens is set to {text}",
                     scope.without("speculative_eagle_topk == 1").without(name), node, name, [text])
        else:
            self.add("default", f"{name} is set to {text}", scope, node, name, [text])


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
