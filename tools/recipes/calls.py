"""Calls and statement bodies for the static evaluator.

Launch arguments are often built by a helper (``cls.get_server_args()``, ``super()._launch_args()``,
a module function) whose body appends to a local list under conditions on class attributes.
``interpret`` walks such a body in order — assignments, ``+=``, ``.append/.extend``, ``if`` on
resolvable conditions — and reports every server-launch call it meets with the names bound at
that point. Loops are not unrolled: launches inside them are still reported, but assignments in
their bodies do not leak out.
"""
from __future__ import annotations

import ast
import contextlib
import copy
from typing import Any, Callable

from tools.recipes.modules import LAUNCHER, ClassInfo, ParsedModule
from tools.recipes.objects import (
    ENVIRON, BoundMethod, EnvInput, Frame, Function, Instance, ModuleRef, Unresolved, _Environ, _Return,
    dataclass_fields, is_dataclass, locate,
)
from tools.recipes.values import Evaluator
from tools.source.origin import Origin

MAX_UNROLL = 32  # a loop over a longer literal list is scanned once, not unrolled

OnLaunch = Callable[[ast.Call, Frame], None]


def call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def is_launcher(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and bool(LAUNCHER.search(call_name(node)))


def launches_in(node: ast.AST, module: ParsedModule) -> list[ast.Call]:
    """The launcher calls inside ``node`` (a node of ``module``), in source order.

    Most statements and methods name no launcher at all; the module's line index says so from
    the text, which saves looking at them. The module's launcher calls are found in one walk, the
    first time any are asked for; a node's are those whose source span lies inside its own."""
    if module.launch_lines is not None and not module.launch_lines.may_contain(node):
        return []
    found = module.launch_calls.get(id(node))  # the module holds the tree, so ids stay unique
    if found is None:
        if module.all_launches is None:
            calls: list[ast.Call] = []
            _collect_launches(module.tree, module, calls)
            module.all_launches = sorted(calls, key=lambda c: (c.lineno, c.col_offset))
        found = module.launch_calls[id(node)] = [c for c in module.all_launches if _inside(c, node)]
    return found


def _collect_launches(node: ast.AST, module: ParsedModule, out: list[ast.Call]) -> None:
    """Launcher calls under ``node``, skipping every statement whose lines name no launcher."""
    lines = module.launch_lines
    for child in ast.iter_child_nodes(node):
        if lines is not None and isinstance(child, ast.stmt) and not lines.may_contain(child):
            continue
        if is_launcher(child):
            out.append(child)  # type: ignore[arg-type]
        _collect_launches(child, module, out)


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    """Source spans nest exactly like the tree (decorators count as part of what they decorate)."""
    first = min([outer.lineno, *(d.lineno for d in getattr(outer, "decorator_list", ()))])  # type: ignore[attr-defined]
    start = (outer.lineno, outer.col_offset) if first == outer.lineno else (first, 0)  # type: ignore[attr-defined]
    return start <= (inner.lineno, inner.col_offset) and \
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)  # type: ignore[attr-defined,operator]


def eval_call(ev: Evaluator, node: ast.Call, frame: Frame) -> Any:
    func = node.func
    args = [ev.eval(a, frame) for a in node.args if not isinstance(a, ast.Starred)]
    if isinstance(func, ast.Name) and func.id in _BUILTINS and func.id not in frame.names:
        return _BUILTINS[func.id](node, args, {k.arg: ev.eval(k.value, frame) for k in node.keywords if k.arg})
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Call) and call_name(func.value) == "super" and frame.owner is not None:
            chain = ev.mro(frame.cls or frame.owner)
            after = chain[next((i for i, c in enumerate(chain) if c is frame.owner), 0) + 1:]
            for cls in after:
                if func.attr in cls.methods:
                    return run_function(ev, BoundMethod(cls, cls.methods[func.attr], frame.cls or cls), args)
            return Unresolved(node=node)
        receiver = ev.eval(func.value, frame)
        if (isinstance(receiver, _Environ) and func.attr == "get") or \
                (isinstance(receiver, ModuleRef) and receiver.name == "os" and func.attr == "getenv"):
            return _from_environment(ev, node, args, receiver if isinstance(receiver, _Environ) else ENVIRON, frame)
        method = _METHODS.get(func.attr)
        if method is not None and not isinstance(receiver, (Unresolved, ClassInfo)):
            try:
                return method(receiver, args)
            except (TypeError, ValueError, AttributeError, KeyError, IndexError):
                return Unresolved(node=node)
    target = ev.eval(func, frame)
    if isinstance(target, ClassInfo) and is_dataclass(target):
        kwargs = {k.arg: ev.eval(k.value, frame) for k in node.keywords if k.arg}
        return Instance(target, {**dict(zip(dataclass_fields(target), args, strict=False)), **kwargs})
    if isinstance(target, (BoundMethod, Function)):
        kwargs = {k.arg: ev.eval(k.value, frame) for k in node.keywords if k.arg}
        return run_function(ev, target, args, kwargs)
    return Unresolved(node=node)


def _from_environment(ev: Evaluator, node: ast.Call, args: list[Any], environ: dict, frame: Frame) -> Any:
    """``os.environ.get(NAME, default)`` / ``os.getenv(NAME, default)``: what the test itself put in
    the environment, else the default when it is a real value, else an input the user must give."""
    if not args or not isinstance(args[0], str):
        return Unresolved(node=node)
    name = args[0]
    if name in environ:
        return environ[name]
    default = args[1] if len(args) > 1 else next(
        (ev.eval(k.value, frame) for k in node.keywords if k.arg == "default"), None)
    if isinstance(default, Unresolved):
        return Unresolved(node=node)
    if isinstance(default, (str, int)) and not isinstance(default, bool) and str(default) != "":
        return default
    return EnvInput(name, node=node, origin=Origin(path=frame.module.rel, line=node.lineno))


def run_function(ev: Evaluator, target: BoundMethod | Function, args: list[Any],
                 kwargs: dict[str, Any] | None = None, on_launch: OnLaunch | None = None) -> Any:
    if isinstance(target, BoundMethod):
        frame = Frame(target.owner.module, cls=target.bound, owner=target.owner)
        node = target.node
        params = [a.arg for a in node.args.args]
        is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
        if params and not is_static:
            params = params[1:]  # cls / self
    else:
        frame, node = Frame(target.module), target.node
        params = [a.arg for a in node.args.args]
    defaults = node.args.defaults
    for name, default in zip(params[len(params) - len(defaults):], defaults, strict=True):
        frame.names[name] = ev.eval(default, frame)
    for name, value in zip(params, args, strict=False):
        frame.names[name] = value
    for name, value in (kwargs or {}).items():
        frame.names[name] = value
    if ev.depth > 30:
        return Unresolved(node.name)
    ev.depth += 1
    try:
        interpret(ev, node.body, frame, on_launch)
    except _Return as done:
        return done.value
    finally:
        ev.depth -= 1
    return None


def interpret(ev: Evaluator, body: list[ast.stmt], frame: Frame, on_launch: OnLaunch | None) -> None:
    for stmt in body:
        if on_launch is not None and not isinstance(stmt, _COMPOUND):
            for sub in launches_in(stmt, frame.module):
                on_launch(sub, frame)
        if isinstance(stmt, ast.Return):
            raise _Return(ev.eval(stmt.value, frame) if stmt.value is not None else None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            value = ev.eval(stmt.value, frame)
            for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                _assign(ev, target, value, frame)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
            current = ev.eval(stmt.target, frame)
            extra = ev.eval(stmt.value, frame)
            if isinstance(current, list) and isinstance(extra, list):
                _assign(ev, stmt.target, current + extra, frame)
            elif isinstance(current, list):  # args += <unknown>: keep the known part
                _assign(ev, stmt.target, current + [Unresolved(node=stmt.value)], frame)
            elif isinstance(current, str) and isinstance(extra, str):
                _assign(ev, stmt.target, current + extra, frame)
            else:
                _assign(ev, stmt.target, Unresolved(node=stmt), frame)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            _mutating_call(ev, stmt.value, frame)
        elif isinstance(stmt, ast.If):
            truth = ev.truth(stmt.test, frame)
            if truth is None:  # unknown condition: report launches inside, keep names unchanged
                for branch in (stmt.body, stmt.orelse):
                    _scan_only(ev, branch, frame, on_launch)
            else:
                interpret(ev, stmt.body if truth else stmt.orelse, frame, on_launch)
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try)):
            interpret(ev, stmt.body, frame, on_launch)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            _loop(ev, stmt, frame, on_launch)
        elif isinstance(stmt, ast.While):
            _scan_only(ev, stmt.body, frame, on_launch)


def _loop(ev: Evaluator, stmt: ast.For | ast.AsyncFor, frame: Frame, on_launch: OnLaunch | None) -> None:
    """A loop over a list we can resolve runs once per item, in the enclosing frame (as Python runs it);
    any other loop is scanned once with its names unchanged."""
    items = ev.eval(stmt.iter, frame)
    if not isinstance(items, list) or len(items) > MAX_UNROLL or any(isinstance(i, Unresolved) for i in items):
        _scan_only(ev, stmt.body, frame, on_launch)
        return
    for item in items:
        if not _bind(stmt.target, item, frame):
            _scan_only(ev, stmt.body, frame, on_launch)
            return
        interpret(ev, stmt.body, frame, on_launch)


def _bind(target: ast.expr, value: Any, frame: Frame) -> bool:
    if isinstance(target, ast.Name):
        frame.names[target.id] = value
        return True
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (list, tuple)) \
            and len(value) == len(target.elts):
        return all(_bind(t, v, frame) for t, v in zip(target.elts, value, strict=True))
    return False


def _scan_only(ev: Evaluator, body: list[ast.stmt], frame: Frame, on_launch: OnLaunch | None) -> None:
    scratch = Frame(frame.module, frame.cls, frame.owner, dict(frame.names))
    with contextlib.suppress(_Return):  # a return inside an unresolved branch says nothing about the enclosing body
        interpret(ev, body, scratch, on_launch)


def _assign(ev: Evaluator, target: ast.expr, value: Any, frame: Frame) -> None:
    if isinstance(target, ast.Name):
        frame.names[target.id] = value
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
            and target.value.id in ("cls", "self"):
        frame.names[f"cls.{target.attr}"] = value
        frame.names[f"{target.value.id}.{target.attr}"] = value
    elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
        container = frame.names.get(target.value.id)
        key = ev.eval(target.slice, frame)
        if isinstance(container, dict) and not isinstance(key, Unresolved):
            updated = _Environ(container) if isinstance(container, _Environ) else dict(container)
            updated[key] = value
            frame.names[target.value.id] = updated


def _mutating_call(ev: Evaluator, call: ast.Call, frame: Frame) -> None:
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return
    name = func.value.id
    current = frame.names.get(name)
    args = [ev.eval(a, frame) for a in call.args]
    if isinstance(current, list) and func.attr in ("append", "extend") and args:
        frame.names[name] = current + ([args[0]] if func.attr == "append" else
                                       (args[0] if isinstance(args[0], list) else [Unresolved(node=call)]))
    elif isinstance(current, dict) and func.attr == "update" and args and isinstance(args[0], dict):
        frame.names[name] = type(current)({**current, **args[0]})


def _keep(result: Any, source: Any) -> Any:
    """A conversion keeps the citation of the value it converts (str(cls.steps) cites cls.steps)."""
    origin = getattr(source, "origin", None)
    return locate(result, origin) if origin is not None else result


def _const_list(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple, dict, str)) else Unresolved(repr(value))


_BUILTINS: dict[str, Callable[[ast.Call, list, dict], Any]] = {
    "str": lambda n, a, k: _keep(str(a[0]), a[0]) if a and not isinstance(a[0], Unresolved)
    else Unresolved(node=n),
    "int": lambda n, a, k: int(a[0]) if a and isinstance(a[0], (int, str)) and str(a[0]).lstrip("-").isdigit()
    else Unresolved(node=n),
    "list": lambda n, a, k: _const_list(a[0]) if a else [],
    "tuple": lambda n, a, k: _const_list(a[0]) if a else [],
    "dict": lambda n, a, k: {**(a[0] if a and isinstance(a[0], dict) else {}), **k},
}

_METHODS: dict[str, Callable[[Any, list], Any]] = {
    "copy": lambda r, a: copy.copy(r),
    "join": lambda r, a: r.join(str(x) for x in a[0]) if isinstance(r, str) and not any(
        isinstance(x, Unresolved) for x in a[0]) else Unresolved("join"),
    "format": lambda r, a: r.format(*a) if isinstance(r, str) else Unresolved("format"),
    "get": lambda r, a: r.get(a[0], a[1] if len(a) > 1 else None) if isinstance(r, dict) else Unresolved("get"),
    "upper": lambda r, a: r.upper(), "lower": lambda r, a: r.lower(),
    "items": lambda r, a: [list(kv) for kv in r.items()] if isinstance(r, dict) else Unresolved("items"),
    "keys": lambda r, a: list(r) if isinstance(r, dict) else Unresolved("keys"),
    "values": lambda r, a: list(r.values()) if isinstance(r, dict) else Unresolved("values"),
}

_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

class CallingEvaluator(Evaluator):
    """The evaluator that also follows calls: helpers, constructors, methods, ``super()``."""

    def call(self, node: ast.Call, frame: Frame) -> Any:
        return eval_call(self, node, frame)


__all__ = ["CallingEvaluator", "eval_call", "run_function", "interpret", "is_launcher", "launches_in", "call_name", "locate"]
