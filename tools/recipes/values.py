"""Static evaluation of the expressions that build server launches (no import, no execution).

Strings and ints produced here remember where they were written (``SrcStr``/``SrcInt`` carry an
``origin``), so a flag value inherited from a fixture's class attribute is cited to that
attribute, not to the list that formats it. Anything we cannot resolve becomes ``Unresolved``
holding the source text, and operations on it stay unresolved instead of guessing.
"""
from __future__ import annotations

import ast
from typing import Any

from tools.recipes.modules import ClassInfo, ModuleIndex, ParsedModule
from tools.recipes.objects import (
    ENVIRON, BoundMethod, Branches, EnvInput, Frame, Function, Instance, ModuleRef, Unresolved, _Environ,
    hardware_test, locate, origin_of,
)
from tools.source.origin import Origin

MAX_DEPTH = 40  # name chains and calls nested deeper than this are left unresolved


class Evaluator:
    """Expressions without calls; ``calls.CallingEvaluator`` adds them (calls build on this class)."""

    def __init__(self, index: ModuleIndex):
        self.index = index
        self.depth = 0

    # ---- classes -------------------------------------------------------------------------
    def class_named(self, name: str, module: ParsedModule) -> ClassInfo | None:
        if name in module.classes:
            return module.classes[name]
        if name in module.imports:
            source, member, level = module.imports[name]
            target = self.index.resolve_module(source, level, module) if member else None
            if target is not None and member in target.classes:
                return target.classes[member]
        return None

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        order: list[ClassInfo] = []

        def visit(cls: ClassInfo, seen: int) -> None:
            if seen > 20 or any(c is cls for c in order):
                return
            order.append(cls)
            for base in cls.node.bases:
                if isinstance(base, ast.Name):
                    found = self.class_named(base.id, cls.module)
                    if found is not None:
                        visit(found, seen + 1)
        visit(info, 0)
        return order

    def class_attr(self, info: ClassInfo, name: str, frame: Frame) -> Any:
        overridden = frame.names.get(f"cls.{name}", _MISSING)
        if overridden is not _MISSING:
            return overridden
        for cls in self.mro(info):
            if name in cls.attrs:
                return self.eval(cls.attrs[name], Frame(cls.module, cls=info, owner=cls))
            if name in cls.methods:
                return BoundMethod(cls, cls.methods[name], info)
        return Unresolved(f"{info.name}.{name}")

    # ---- names ---------------------------------------------------------------------------
    def module_name(self, name: str, module: ParsedModule) -> Any:
        if name in module.constants:
            return self.eval(module.constants[name], Frame(module))
        if name in module.classes:
            return module.classes[name]
        if name in module.functions:
            return Function(module, module.functions[name])
        if name in module.imports:
            source, member, level = module.imports[name]
            if member is None:
                return ModuleRef(source)
            target = self.index.resolve_module(source, level, module)
            if target is not None:
                return self.module_name(member, target)
            sub = self.index.resolve_module(f"{source}.{member}" if source else member, level, module)
            if sub is not None:
                return sub
        return Unresolved(name)

    # ---- expressions ---------------------------------------------------------------------
    def eval(self, node: ast.AST, frame: Frame) -> Any:
        if self.depth > MAX_DEPTH:
            return Unresolved(node=node)
        self.depth += 1
        try:
            value = self._eval(node, frame)
        finally:
            self.depth -= 1
        return locate(value, Origin(path=frame.module.rel, line=getattr(node, "lineno", 0)))

    def _eval(self, node: ast.AST, frame: Frame) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        handler = self._HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node, frame)
        if isinstance(node, ast.BinOp):
            return _binop(node, self.eval(node.left, frame), self.eval(node.right, frame))
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test, frame)
            if test is None and hardware_test(node.test):
                return Branches(ast.unparse(node.test), self.eval(node.body, frame), self.eval(node.orelse, frame),
                                node=node)
            return Unresolved(node=node) if test is None else self.eval(node.body if test else node.orelse, frame)
        if isinstance(node, ast.Call):
            return self.call(node, frame)
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            truth = self.truth(node, frame)
            return Unresolved(node=node) if truth is None else truth
        return Unresolved(node=node)

    def call(self, node: ast.Call, frame: Frame) -> Any:
        return Unresolved(node=node)

    def _joined(self, node: ast.JoinedStr, frame: Frame) -> Any:
        parts, cited = [], []
        for piece in node.values:
            part = self.eval(piece.value, frame) if isinstance(piece, ast.FormattedValue) else piece.value
            if isinstance(part, (Unresolved, ClassInfo)) or not _scalar(part):
                return Unresolved(node=node)
            parts.append(str(part))
            if isinstance(piece, ast.FormattedValue) and origin_of(part) is not None:
                cited.append(origin_of(part))
        text = "".join(parts)
        # f"--flag={cls.value}": cite where the one interpolated value was written
        return locate(text, cited[0]) if len(cited) == 1 else text

    def _name(self, node: ast.Name, frame: Frame) -> Any:
        if node.id in frame.names:
            return frame.names[node.id]
        if node.id in ("cls", "self") and frame.cls is not None:
            return frame.cls
        return self.module_name(node.id, frame.module)

    def _attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        if isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in frame.names:
            return frame.names[f"{node.value.id}.{node.attr}"]
        base = self.eval(node.value, frame)
        if isinstance(base, ClassInfo):
            bound = frame.cls if (frame.cls is not None and isinstance(node.value, ast.Name)
                                  and node.value.id in ("cls", "self")) else base
            return self.class_attr(bound, node.attr, frame if bound is frame.cls else Frame(base.module))
        if isinstance(base, Instance):
            return base.attribute(self, node.attr)
        if isinstance(base, ParsedModule):
            return self.module_name(node.attr, base)
        if isinstance(base, ModuleRef) and base.name == "os" and node.attr == "environ":
            return ENVIRON
        return Unresolved(node=node)

    def _sequence(self, node: ast.List | ast.Tuple | ast.Set, frame: Frame) -> list[Any]:
        items: list[Any] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                inner = self.eval(element.value, frame)
                if isinstance(inner, list):
                    items.extend(inner)
                elif isinstance(inner, Branches):  # *([...] if is_hip() else [...]): spliced per variant
                    items.append(inner)
                else:
                    items.append(Unresolved(node=element))
            else:
                items.append(self.eval(element, frame))
        return items

    def _dict(self, node: ast.Dict, frame: Frame) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key, val in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                merged = self.eval(val, frame)
                if isinstance(merged, dict):
                    result.update(merged)
                continue
            result[self.eval(key, frame)] = self.eval(val, frame)
        return result

    def _subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        base, key = self.eval(node.value, frame), self.eval(node.slice, frame)
        if isinstance(base, _Environ) and isinstance(key, str) and key not in base:
            return EnvInput(key, node=node, origin=Origin(path=frame.module.rel, line=node.lineno))
        try:
            return base[key] if isinstance(base, (list, dict)) and not isinstance(key, Unresolved) else \
                Unresolved(node=node)
        except (KeyError, IndexError, TypeError):
            return Unresolved(node=node)

    def _list_comp(self, node: ast.ListComp, frame: Frame) -> Any:
        generator = node.generators[0]
        if len(node.generators) != 1 or generator.ifs or not isinstance(generator.target, ast.Name):
            return Unresolved(node=node)
        source = self.eval(generator.iter, frame)
        if not isinstance(source, list):
            return Unresolved(node=node)
        name = generator.target.id
        return [self.eval(node.elt, Frame(frame.module, frame.cls, frame.owner, {**frame.names, name: item}))
                for item in source]

    _HANDLERS: dict[type, Any] = {
        ast.JoinedStr: _joined, ast.Name: _name, ast.Attribute: _attribute, ast.List: _sequence,
        ast.Tuple: _sequence, ast.Set: _sequence, ast.Dict: _dict, ast.Subscript: _subscript, ast.ListComp: _list_comp,
    }

    def truth(self, node: ast.AST, frame: Frame) -> bool | None:
        """Evaluate a condition; None when any part is unresolved."""
        if isinstance(node, ast.BoolOp):
            values = [self.truth(v, frame) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if False in values else (None if None in values else True)
            return True if True in values else (None if None in values else False)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand, frame)
            return None if inner is None else not inner
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = self.eval(node.left, frame), self.eval(node.comparators[0], frame)
            if isinstance(left, Unresolved) or isinstance(right, Unresolved):
                return None
            op = node.ops[0]
            try:
                return {ast.Eq: lambda: left == right, ast.NotEq: lambda: left != right,
                        ast.Lt: lambda: left < right, ast.LtE: lambda: left <= right,
                        ast.Gt: lambda: left > right, ast.GtE: lambda: left >= right,
                        ast.In: lambda: left in right, ast.NotIn: lambda: left not in right,
                        ast.Is: lambda: left is right or left == right,
                        ast.IsNot: lambda: not (left is right or left == right)}[type(op)]()
            except (KeyError, TypeError):
                return None
        value = self.eval(node, frame)
        if isinstance(value, (Unresolved, ClassInfo, ParsedModule)):
            return None
        return bool(value)


_MISSING = object()


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) or value is None


def _binop(node: ast.BinOp, left: Any, right: Any) -> Any:
    if isinstance(node.op, ast.Add) and isinstance(left, list) != isinstance(right, list) and \
            (isinstance(left, Unresolved) or isinstance(right, Unresolved)):
        # args + cls.unknown_extra: keep what is known, mark the unknown part
        return left + [right] if isinstance(left, list) else [left] + right
    if isinstance(left, Unresolved) or isinstance(right, Unresolved):
        return Unresolved(node=node)
    if isinstance(node.op, ast.Add):
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            return left + right
    if isinstance(node.op, (ast.Sub, ast.Mult, ast.FloorDiv)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
        return {ast.Sub: left - right, ast.Mult: left * right}.get(type(node.op)) \
            if not isinstance(node.op, ast.FloorDiv) else (left // right if right else Unresolved(node=node))
    if isinstance(node.op, ast.BitOr) and isinstance(left, dict) and isinstance(right, dict):
        return {**left, **right}
    return Unresolved(node=node)
