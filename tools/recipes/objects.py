"""The values the static evaluator produces besides plain str/int/list/dict: cited strings and ints,
unresolved expressions, references to modules, functions, methods, and dataclass instances."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from tools.recipes.modules import ClassInfo, ParsedModule
from tools.source.origin import Origin


@dataclass
class Frame:
    """Where an expression is evaluated: its module, what cls/self are bound to, the local names."""

    module: ParsedModule
    cls: ClassInfo | None = None            # what cls/self are bound to
    owner: ClassInfo | None = None          # class that defines the running method (for super())
    names: dict[str, Any] = field(default_factory=dict)


class Evaluates(Protocol):
    """What an instance needs of the evaluator (tools/recipes/values.py) to read a class default."""

    def eval(self, node: ast.AST, frame: Frame) -> Any: ...


class Unresolved:
    """An expression the evaluator could not resolve, with its source text (unparsed only when read:
    most unresolved values are dropped without anyone looking at them)."""

    __slots__ = ("_text", "_node")

    def __init__(self, text: str | None = None, node: ast.AST | None = None):
        self._text, self._node = text, node

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = ast.unparse(self._node) if self._node is not None else "?"
        return self._text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unresolved) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return f"<unresolved: {self.text}>"


class EnvInput(Unresolved):
    """A value the test takes from an environment variable that has no (or an empty) default:
    an input the user must give, never a value (``os.environ.get("SGLANG_DRAFT", "")``)."""

    __slots__ = ("env_name", "origin")

    def __init__(self, env_name: str, node: ast.AST | None = None, origin: Origin | None = None):
        super().__init__(node=node)
        self.env_name, self.origin = env_name, origin


class Branches(Unresolved):
    """``a if is_blackwell() else b``: a choice on the hardware the test runs on. Both branches are
    evaluated; the recipe becomes one variant per branch, each with its condition noted."""

    __slots__ = ("test", "yes", "no")

    def __init__(self, test: str, yes: Any, no: Any, node: ast.AST | None = None):
        super().__init__(node=node)
        self.test, self.yes, self.no = test, yes, no


# Calls that ask which hardware the test runs on (sglang.srt.utils, sglang.test.test_utils): a
# condition on them is a hardware variant, not an unknown.
HARDWARE_TEST = re.compile(r"^_?is_(blackwell|hopper|ampere|sm\d+\w*|hip|rocm|cuda|npu|xpu|cpu|musa|mps|hpu|"
                           r"in_amd_ci|amd\w*|mi\d+\w*|gfx\w*|h100|h200|h20|b200|b300|gb200|gb300)", re.I)


def hardware_test(node: ast.AST) -> bool:
    """Whether a condition only asks about the hardware: ``is_blackwell()``, ``not is_hip()``, ``a or b``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return hardware_test(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(hardware_test(v) for v in node.values)
    if isinstance(node, ast.Call) and not node.args:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return bool(HARDWARE_TEST.match(name))
    return False


class SrcStr(str):
    origin: Origin | None = None


class SrcInt(int):
    origin: Origin | None = None


def locate(value: Any, origin: Origin) -> Any:
    """Attach an origin to a str/int that has none yet (bools stay plain)."""
    if isinstance(value, (SrcStr, SrcInt, bool)):
        return value
    if isinstance(value, str):
        wrapped: Any = SrcStr(value)
    elif isinstance(value, int):
        wrapped = SrcInt(value)
    else:
        return value
    wrapped.origin = origin
    return wrapped


def origin_of(value: Any) -> Origin | None:
    return getattr(value, "origin", None)


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


@dataclass(frozen=True)
class ModuleRef:
    name: str  # a plain ``import x`` that is not in the tree (os, json, ...)


@dataclass
class Function:
    module: ParsedModule
    node: ast.FunctionDef


@dataclass
class BoundMethod:
    owner: ClassInfo
    node: ast.FunctionDef
    bound: ClassInfo


@dataclass
class Instance:
    """An object of a dataclass defined in the tree (``ModelConfig(model_path=..., other_args=[...])``):
    the arguments it was built with, and the class's defaults for the rest."""

    cls: ClassInfo
    values: dict[str, Any]

    def attribute(self, ev: Evaluates, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        if name in self.cls.attrs:
            return ev.eval(self.cls.attrs[name], Frame(self.cls.module, cls=self.cls, owner=self.cls))
        return Unresolved(f"{self.cls.name}().{name}")


def is_dataclass(info: ClassInfo) -> bool:
    return any("dataclass" in ast.unparse(d) for d in info.node.decorator_list)


def dataclass_fields(info: ClassInfo) -> list[str]:
    """Field names in declaration order (what positional arguments bind to)."""
    return [s.target.id for s in info.node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


class _Environ(dict):
    """``os.environ``: the launcher's inherited environment; only additions are recipe data."""


ENVIRON = _Environ()
