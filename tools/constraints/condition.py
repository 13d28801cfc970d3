"""Deciding a rule's condition for one configuration, in three values: holds, does not, cannot tell.

A rule keeps the ``if`` tests it sits under (``Rule.tests``) and the assignments of the local names
they use (``Rule.bindings``). ``decide`` evaluates them against ``Facts``: the architecture, the flags
given, and every other field at its declared default. Whatever the source computes at run time (a
call, a config read, an environment variable) is unknown, and so is anything built on it: ``None``,
and the caller reports the rule instead of applying it.
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field as dc_field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from tools.source.fields import FieldDef

ARCH_NAME = re.compile(r"(^|_)arch", re.I)
UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "<unknown>"})()
# A setting that is given but whose value only the user knows (a draft path the test reads from an
# environment variable): it is not None and not empty, and nothing else about it is known.
GIVEN: Any = type("Given", (), {"__repr__": lambda self: "<given>"})()
MAX_DEPTH = 8  # bindings that refer to bindings: deeper chains are unknown


class Binding(BaseModel):
    """One assignment to a local name a condition uses: its value, under the ``if`` tests around it."""

    tests: list[str] = Field(default_factory=list, description="Tests (as written) the assignment sits under")
    value: str = Field(description="The assigned expression, as written")


@dataclass
class Facts:
    """What is known about one server configuration when its rules are checked."""

    architecture: str | None
    given: dict[str, Any] = dc_field(default_factory=dict)   # field -> value from the flags
    fields: dict[str, FieldDef] = dc_field(default_factory=dict)

    def value(self, name: str) -> Any:
        if name in self.given:
            return self.given[name]
        definition = self.fields.get(name)
        if definition is None or definition.default is None:
            return UNKNOWN
        return _literal(definition.default)

    def knows(self, name: str) -> bool:
        return name in self.given or name in self.fields


@lru_cache(maxsize=4096)
def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNKNOWN


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def typed_value(text: str, definition: FieldDef | None) -> Any:
    """A flag's value as the field's type reads it: '3' is 3 for an int field, a switch is True."""
    kind = definition.type if definition is not None else ""
    if "bool" in kind and text in ("", "true", "True", "1"):
        return True
    if "bool" in kind and text in ("false", "False", "0"):
        return False
    if re.search(r"\bint\b", kind) and re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.search(r"\bfloat\b", kind):
        try:
            return float(text)
        except ValueError:
            return UNKNOWN
    return text


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b, ast.Is: lambda a, b: a is b or (a == b and b is not None),
            ast.IsNot: lambda a, b: not (a is b or (a == b and b is not None))}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_CALLS = {"int": int, "str": str, "bool": bool, "len": len, "float": float}


class _Evaluator:
    def __init__(self, facts: Facts, bindings: dict[str, list[Binding]]):
        self.facts, self.bindings, self.depth = facts, bindings, 0

    def truth(self, node: ast.AST) -> bool | None:
        value = self.value(node)
        if value is UNKNOWN:
            return None
        if value is GIVEN:
            return True
        try:
            return bool(value)
        except Exception:  # noqa: BLE001 - a value whose truth cannot be taken is unknown, not an error
            return None

    def value(self, node: ast.AST) -> Any:  # noqa: C901 - one dispatch over expression kinds
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            if self.facts.knows(node.attr) or node.attr.startswith("speculative_"):
                return self.facts.value(node.attr)
            return UNKNOWN
        if isinstance(node, ast.Subscript) and "architectures" in ast.unparse(node.value):
            return self.facts.architecture or UNKNOWN
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(e) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
        if isinstance(node, ast.BoolOp):
            return self.bool_op(node)
        if isinstance(node, ast.UnaryOp):
            inner = self.value(node.operand)
            if inner is UNKNOWN:
                return UNKNOWN
            if isinstance(node.op, ast.Not):
                truth = self.truth(node.operand)
                return UNKNOWN if truth is None else not truth
            return -inner if isinstance(node.op, ast.USub) and isinstance(inner, (int, float)) else UNKNOWN
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self.apply(_BINARY[type(node.op)], self.value(node.left), self.value(node.right))
        if isinstance(node, ast.IfExp):
            test = self.truth(node.test)
            return UNKNOWN if test is None else self.value(node.body if test else node.orelse)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
                and len(node.args) == 1 and not node.keywords:
            return self.apply(_CALLS[node.func.id], self.value(node.args[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and node.func.attr in ("upper", "lower"):
            inner = self.value(node.func.value)
            return getattr(inner, node.func.attr)() if isinstance(inner, str) else UNKNOWN
        return UNKNOWN

    def name(self, name: str) -> Any:
        if name in self.bindings:
            return self.bound(self.bindings[name])
        if self.facts.knows(name) or name.startswith("speculative_"):
            return self.facts.value(name)
        if ARCH_NAME.search(name):
            return self.facts.architecture or UNKNOWN
        return UNKNOWN

    def bound(self, assignments: list[Binding]) -> Any:
        """The value after the assignments, in order; one under an undecidable test makes it unknown
        unless it assigns the value the name already has."""
        if self.depth > MAX_DEPTH:
            return UNKNOWN
        self.depth += 1
        try:
            current = UNKNOWN
            for binding in assignments:
                tests = [self.truth(t) if (t := _parse(text)) is not None else None for text in binding.tests]
                if False in tests:
                    continue
                node = _parse(binding.value)
                value = self.value(node) if node is not None else UNKNOWN
                current = value if None not in tests or (value is not UNKNOWN and value == current) else UNKNOWN
            return current
        finally:
            self.depth -= 1

    def bool_op(self, node: ast.BoolOp) -> Any:
        truths = [self.truth(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in truths else (UNKNOWN if None in truths else True)
        return True if True in truths else (UNKNOWN if None in truths else False)

    def compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.value(right_node)
            if isinstance(op, (ast.Is, ast.IsNot)) and GIVEN in (left, right) and None in (left, right):
                result = isinstance(op, ast.IsNot)  # given: whatever it is, it is not None
            else:
                result = self.apply(_COMPARE[type(op)], left, right)
            if result is UNKNOWN or not result:
                return result
            left = right
        return True

    @staticmethod
    def apply(fn: Any, *args: Any) -> Any:
        if any(a is UNKNOWN or a is GIVEN for a in args):
            return UNKNOWN
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - e.g. None > 1 or "a" in 3: the source would fail too; unknown
            return UNKNOWN


def decide(texts: list[str], facts: Facts, bindings: dict[str, list[Binding]] | None = None) -> bool | None:
    """Whether every test holds (an empty list holds); None when it cannot be decided."""
    evaluator = _Evaluator(facts, bindings or {})
    result: bool | None = True
    for text in texts:
        node = _parse(text)
        truth = evaluator.truth(node) if node is not None else None
        if truth is False:
            return False
        if truth is None:
            result = None
    return result


def names_in(text: str) -> set[str]:
    """Plain names an expression reads (``cfg`` in ``cfg.x`` is only a way to reach a field: left out)."""
    node = _parse(text)
    if node is None:
        return set()
    bases = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in bases}
