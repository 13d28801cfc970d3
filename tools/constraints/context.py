"""Reading the tests hook code uses: architecture and algorithm tests, field references, the
algorithm dispatcher of ``spec_info.py`` (``elif self.is_eagle(): _handle_eagle_family(...)``, with
``is_eagle`` returning ``self in (SpeculativeAlgorithm.EAGLE, ...)``), Call sites (which guards a function
is called under, which settings an auto-parameter chooser's numbers become) are in ``callsites.py``.
"""
from __future__ import annotations

import ast
import re

ARCH_NAME = re.compile(r"arch", re.I)


def strings(node: ast.AST) -> list[str] | None:
    """The string constants of a str / list / tuple / set literal, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        found = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return found if len(found) == len(node.elts) else None
    return None


def arch_test(test: ast.AST) -> list[str] | None:
    """Architectures named by ``model_arch in [...]`` / ``arch == "X"`` (or an ``or`` of them)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [arch_test(v) for v in test.values]
        return [a for p in parts for a in p] if all(p is not None for p in parts) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.Eq)) \
            and ARCH_NAME.search(ast.unparse(test.left)):
        return strings(test.comparators[0])
    return None


def field_of(node: ast.AST) -> str | None:
    """``cfg.speculative_x`` / ``server_args.speculative_x`` / bare ``speculative_x`` -> field name."""
    if isinstance(node, ast.Attribute) and node.attr.startswith("speculative_"):
        return node.attr
    if isinstance(node, ast.Name) and node.id.startswith("speculative_"):
        return node.id
    return None


def algorithm_test(test: ast.AST) -> list[str] | None:
    """Algorithms named by ``speculative_algorithm == "X"`` / ``in (...)`` (or an ``or`` of them)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [algorithm_test(v) for v in test.values]
        return [a for p in parts for a in p] if all(p is not None for p in parts) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and field_of(test.left) == "speculative_algorithm" \
            and isinstance(test.ops[0], (ast.In, ast.Eq)):
        return strings(test.comparators[0])
    return None


def algorithm_dispatch(tree: ast.Module) -> dict[str, set[str]]:
    """handler function -> algorithm names, from the ``handle_server_args`` dispatcher and ``is_*``."""
    predicates: dict[str, set[str]] = {}
    dispatch: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("is_"):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Compare):
                    names = {e.attr for e in ast.walk(sub.value.comparators[0]) if isinstance(e, ast.Attribute)}
                    if names:
                        predicates[node.name] = names
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            called = [s.value.func.id for s in node.body if isinstance(s, ast.Expr)
                      and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)]
            tests = [c.func.attr for c in ast.walk(node.test) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Attribute) and c.func.attr in predicates]
            for name in called:
                for test in tests:
                    dispatch.setdefault(name, set()).update(predicates[test])
    return dispatch
