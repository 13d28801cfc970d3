"""Checks on the code's shape, as tests: ruff's pyflakes (F) over all our code; bugbear (B) and
simplify (SIM) over agent/ and tools/; no module there over 300 lines, no function over 60."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "tools")
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60


def _ruff(select: str, *paths: str) -> subprocess.CompletedProcess:
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run([str(ruff), "check", "--select", select, "--output-format", "concise", *paths],
                          cwd=ROOT, capture_output=True, text=True)


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def function_lengths(source: str) -> dict[str, int]:
    """Lines of each function and method (decorators not counted), by qualified name."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[prefix + child.name] = child.end_lineno - child.lineno + 1
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return lengths


def test_no_pyflakes_findings():
    out = _ruff("F", "agent", "tools", "tests", "benchmarks")
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_bugbear_or_simplify_findings():
    out = _ruff("F,B,SIM", *PACKAGES)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_module_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules (at most {MAX_MODULE_LINES} lines each): {long}"


def test_no_function_over_60_lines():
    long = {}
    for path in _modules():
        relative = path.relative_to(ROOT).as_posix()
        for name, lines in function_lengths(path.read_text()).items():
            if lines > MAX_FUNCTION_LINES:
                long[f"{relative}:{name}"] = lines
    assert not long, f"split these functions (at most {MAX_FUNCTION_LINES} lines each): {long}"


def test_the_length_check_measures_functions_and_methods():
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    source = f"def long():\n{body}\n\n\nclass C:\n    def short(self):\n        return 1\n"
    assert function_lengths(source) == {"long": 62, "C.short": 2}
