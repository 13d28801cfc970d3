"""The benchmarks run as shipped: nothing imported from tests/, every goal a ratio, exit 1 on a miss."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.campaign_doubles import double_unit_seconds
from benchmarks.harness import finish, row

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
TIME_UNITS = {"s", "ms"}


def _calls(tree: ast.AST, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
            yield node


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_imports_nothing_from_tests(script: Path):
    tree = ast.parse(script.read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m == "tests" or m.startswith("tests.")], script.name


# any way of reaching tests/ as code: a plain import, importlib or __import__, tests/ put on sys.path
# (its folders read as files - doubles run as programs, the golden run, sshd's scripts - are fine)
TESTS_AS_CODE = re.compile(r"^\s*(?:from|import)\s+tests\b|import_module\(\s*[rbf]?['\"]tests\b|__import__\(\s*['\"]tests\b"
                           r"|sys\.path\.\w+\([^)]*['\"]tests\b|\b(?:PYTEST_|DSV4_TEST_)\w*", re.M)


def test_no_benchmark_reaches_into_tests_as_code():
    """Text, not only the AST: importlib, sys.path and test-session variables count too."""
    found = [f"{script.name}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0).strip()}"
             for script in SCRIPTS for text in [script.read_text()] for m in TESTS_AS_CODE.finditer(text)]
    assert not found, found


def test_the_grep_for_tests_as_code_finds_each_way():
    for line in ["from tests.conftest import x", "import tests.doubles", "importlib.import_module('tests.cli_helpers')",
                 "__import__(\"tests\")", "sys.path.insert(0, 'tests')", "env['DSV4_TEST_SLOWDOWN'] = '3'",
                 "os.environ.get('PYTEST_CURRENT_TEST')"]:
        assert TESTS_AS_CODE.search(line), line
    for line in ["DOUBLES = REPO / 'tests' / 'doubles'", "# tests/doubles/tuning_block_wise_kernel.py", "latest = 1"]:
        assert not TESTS_AS_CODE.search(line), line


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_goal_is_in_seconds(script: Path):
    """A goal in seconds flips between met and missed with the machine's load: goals are ratios."""
    for call in _calls(ast.parse(script.read_text()), "row"):
        unit = call.args[3] if len(call.args) > 3 else None
        has_limit = len(call.args) > 6 or any(k.arg == "limit" for k in call.keywords)
        if isinstance(unit, ast.Constant) and unit.value in TIME_UNITS:
            assert not has_limit, f"{script.name}:{call.lineno}: a goal in {unit.value}; measure a ratio instead"


ABSOLUTE_GOAL = re.compile(r"[<>≤]=?\s+\{?[\w.:]*\}?\s*(?:s|ms|sec|seconds)\b(?![\w'])")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_goal_string_is_in_seconds(script: Path):
    """The goal texts too (a goal compared outside ``row``): none reads "<= 1 s"."""
    goals = [node.value for node in ast.walk(ast.parse(script.read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and ABSOLUTE_GOAL.search(node.value)]
    assert not goals, f"{script.name}: {goals}"


def test_the_absolute_goal_grep_finds_one():
    assert all(ABSOLUTE_GOAL.search(g) for g in ["<= 1 s", "< 0.5 ms", "<= {LIMIT} s", "≤ 2 seconds"])
    assert not any(ABSOLUTE_GOAL.search(g) for g in ["<= 1.2", "<= 2 %", "< 0.6", "median 79 ms"])


def test_finish_exits_1_on_a_missed_goal(tmp_path, monkeypatch):
    monkeypatch.setenv("DSV4_BENCH_OUT", str(tmp_path / "rows.json"))
    met = row("b", "fast", [1.0, 1.1], "x", "ref", "<= 2", 2.0)
    missed = row("b", "slow", [3.0, 2.9, 3.1], "x", "ref", "<= 2", 2.0)
    assert finish([met]) == 0 and finish([met, missed]) == 1
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["median"], r["low"], r["high"], r["ok"]) for r in rows] == [(1.05, 1.0, 1.1, True), (3.0, 2.9, 3.1, False)]


def test_the_benchmarks_law_of_the_tuning_double_is_the_doubles(monkeypatch):
    from tests.doubles.tuning_block_wise_kernel import unit_seconds

    monkeypatch.setenv("DSV4_DOUBLE_UNIT_S", "0.6")
    monkeypatch.setenv("DSV4_DOUBLE_COST", "work")
    for m, n, k in [(1, 4096, 7168), (64, 512, 1024), (8192, 7168, 2048)]:
        assert double_unit_seconds(m, n, k, 0.6) == pytest.approx(unit_seconds(m, n, k))


def test_run_all_runs_a_benchmark_as_shipped(tmp_path):
    """No test-session variable, another working folder: the table and exit 0 (goal met)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV4_")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick", "--only",
                           "parse_results.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "÷ json.loads of every line" in done.stdout and "| met |" in done.stdout
