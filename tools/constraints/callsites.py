"""Where the hooks call each function, and under which tests: one pass over the hook files.

A function's scope comes from its call sites: calls under ``if model_arch in [...]`` or a
registration decorator (architectures), under ``if speculative_algorithm == "X"`` (algorithms), and
helpers called only from scoped functions inherit the scope. Its gate is the ``or`` of the tests
every call site sits under; a guard that raises is no gate (past it the function runs whenever the
server accepted the settings). A function passed to a runner counts as called there. The same pass
maps an auto-parameter chooser's returned numbers to the settings they become.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field as dc_field

from tools.constraints.context import algorithm_test, arch_test, field_of
from tools.source.origin import Origin

Test = tuple[ast.expr, bool]  # (test, negated)


@dataclass
class Site:
    callee: str
    caller: str
    tests: tuple[Test, ...]


@dataclass
class CallSites:
    sites: list[Site] = dc_field(default_factory=list)
    registered: dict[str, set[str]] = dc_field(default_factory=dict)  # function -> archs of its decorators
    unpacks: list[tuple[str, ast.Assign]] = dc_field(default_factory=list)  # (function, a, b = f(...))
    keywords: dict[str, dict[str, str]] = dc_field(default_factory=dict)  # function -> {local name: keyword}
    _memo: dict[tuple[int, str], object] = dc_field(default_factory=dict)

    @classmethod
    def build(cls, trees: list[ast.Module]) -> "CallSites":
        index = cls()
        for tree in trees:
            index._visit(tree.body, "", ())
        defined = {n.name for t in trees for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        index.sites = [s for s in index.sites if s.callee in defined]
        return index

    def _record(self, node: ast.AST, caller: str, tests: tuple[Test, ...]) -> None:
        if _unpacks_call(node):
            self.unpacks.append((caller, node))  # type: ignore[arg-type]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                for k in sub.keywords:
                    if k.arg and isinstance(k.value, ast.Name):
                        self.keywords.setdefault(caller, {})[k.value.id] = k.arg
                name = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", "")
                for callee in [name, *(a.id for a in sub.args if isinstance(a, ast.Name))]:
                    if callee and callee != caller:
                        self.sites.append(Site(callee, caller, tests))

    def _visit(self, body: list[ast.stmt], caller: str, tests: tuple[Test, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in stmt.decorator_list:
                    if isinstance(decorator, ast.Call) and "register" in ast.unparse(decorator.func):
                        archs = {a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                        self.registered.setdefault(stmt.name, set()).update(archs)
                self._visit(stmt.body, stmt.name, ())
            elif isinstance(stmt, ast.ClassDef):
                self._visit(stmt.body, caller, ())
            elif isinstance(stmt, ast.If):
                self._record(stmt.test, caller, tests)
                self._visit(stmt.body, caller, (*tests, (stmt.test, False)))
                self._visit(stmt.orelse, caller, (*tests, (stmt.test, True)))
                if not stmt.orelse and stmt.body and isinstance(stmt.body[-1], ast.Return):
                    tests = (*tests, (stmt.test, True))  # past an early return: only when the test failed
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
                for header in (getattr(stmt, "iter", None), getattr(stmt, "test", None)):
                    if header is not None:
                        self._record(header, caller, tests)
                for item in getattr(stmt, "items", []):
                    self._record(item.context_expr, caller, tests)
                for part in ("body", "orelse", "finalbody"):
                    self._visit(getattr(stmt, part, []) or [], caller, tests)
                for handler in getattr(stmt, "handlers", []):
                    self._visit(handler.body, caller, tests)
            else:
                self._record(stmt, caller, tests)

    def architectures(self) -> dict[str, set[str]]:
        """function -> architectures, from calls under architecture tests and registration decorators."""
        found = {k: set(v) for k, v in self.registered.items() if v}
        for site in self.sites:
            for test, negated in site.tests:
                archs = None if negated else self._memoised(test, "arch", arch_test)
                if archs:
                    found.setdefault(site.callee, set()).update(archs)
        return self._inherit(found)

    def algorithms(self, known: dict[str, set[str]]) -> dict[str, set[str]]:
        """function -> algorithms: ``known`` (the dispatcher's) plus calls under algorithm tests, then
        helpers called only from functions that have a scope."""
        found = {k: set(v) for k, v in known.items()}
        for site in self.sites:
            for test, negated in site.tests:
                algos = None if negated else self._memoised(test, "algo", algorithm_test)
                if algos:
                    found.setdefault(site.callee, set()).update(algos)
        return self._inherit(found)

    def _inherit(self, found: dict[str, set[str]]) -> dict[str, set[str]]:
        """A function without a scope of its own, called only from scoped functions, gets their scope."""
        callers: dict[str, set[str]] = {}
        for site in self.sites:
            if site.caller:
                callers.setdefault(site.callee, set()).add(site.caller)
        for _ in range(4):  # call chains in the hooks are short; a few passes reach the fixed point
            more = {name: set().union(*(found[c] for c in who)) for name, who in callers.items()
                    if name not in found and all(c in found for c in who)}
            if not more:
                break
            found.update(more)
        return found

    def gates(self) -> dict[str, str]:
        """function -> the ``or`` of its call sites' other tests, when every site has one."""
        by_callee: dict[str, list[list[str]]] = {}
        for site in self.sites:
            texts = [t for t in (self._memoised(test, f"gate{negated}", lambda n, neg=negated: _gate_text(n, neg))
                                 for test, negated in site.tests) if t]
            by_callee.setdefault(site.callee, []).append(texts)
        return {name: " or ".join(f"({' and '.join(t)})" if len(t) > 1 else t[0] for t in calls)
                for name, calls in by_callee.items() if all(calls)}


    def stages(self, trees: list[tuple[str, ast.Module]]) -> dict[str, tuple[int, str, Origin]]:
        """function -> (its place in SGLang's resolution order, the step that reaches it, where that step
        is run). The order is the resolution pipeline's own: the function that hands the most hooks to a
        runner (``run_hook(handle_x, server_args)``, ``run_post_process_pass(server_args, _x)``), in the
        order it does so; a function takes the earliest step that calls it, directly or through helpers."""
        runs: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for rel, tree in trees:
            for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("run_"):
                        step = next((a.id for a in node.args if isinstance(a, ast.Name) and a.id != "server_args"), None)
                        if step is not None:
                            runs.setdefault((rel, fn.name), []).append((node.lineno, step))
        if not runs:
            return {}
        (rel, _), steps = max(runs.items(), key=lambda kv: len(kv[1]))
        callees: dict[str, set[str]] = {}
        for site in self.sites:
            callees.setdefault(site.caller, set()).add(site.callee)
        found: dict[str, tuple[int, str, Origin]] = {}
        for index, (line, step) in enumerate(sorted(steps)):
            pending = [step]
            while pending:
                name = pending.pop()
                if name in found:
                    continue
                found[name] = (index, step, Origin(path=rel, line=line))
                pending += sorted(callees.get(name, ()))
        return found

    def tuple_fields(self) -> dict[str, list[str]]:
        """chooser -> the settings its returned tuple fills, in order."""
        found: dict[str, list[str]] = {}
        for caller, stmt in self.unpacks:
            names = [e.id for e in stmt.targets[0].elts if isinstance(e, ast.Name)]  # type: ignore[attr-defined]
            mapping = self.keywords.get(caller, {})
            if names and all(n in mapping for n in names):
                found[stmt.value.func.id] = [mapping[n] for n in names]  # type: ignore[attr-defined]
        return found

    def _memoised(self, node: ast.expr, what: str, compute) -> object:  # noqa: ANN001 - one of the test readers
        key = (id(node), what)  # the trees outlive this index (parse cache), so ids stay unique
        if key not in self._memo:
            self._memo[key] = compute(node)
        return self._memo[key]


def _unpacks_call(node: ast.AST) -> bool:
    """``a, b, c = name(...)``"""
    return isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
        and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)


def _gate_text(test: ast.expr, negated: bool) -> str | None:
    if arch_test(test) is not None or algorithm_test(test) is not None:
        return None
    if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.IsNot) and \
            field_of(test.left) == "speculative_algorithm":
        return None  # 'speculation is on' restricts nothing
    text = ast.unparse(test)
    return f"not ({text})" if negated else text
