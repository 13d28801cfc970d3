"""The suite asserts nothing about how long something took: on a loaded machine any upper bound on
wall time fails, whatever the code does. This reads every test module and fails on an ``assert``
whose comparison puts a clock reading (``time.monotonic()``, ``perf_counter()``, ``time.time()``,
``process_time()``, or a name assigned from one) below a bound. A lower bound (``elapsed >= wait``:
the code did wait) stays: load only lengthens it. Waits go through tests/slowdown.py."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# helpers that take a quiet machine's seconds and scale them themselves
SCALING_HELPERS = {"agent", "_cli"}
CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _reads_clock(node: ast.AST, derived: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in CLOCKS \
                and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "time":
            return True
        if isinstance(sub, ast.Name) and sub.id in derived:
            return True
    return False


def _clock_names(function: ast.AST) -> set[str]:
    """Names assigned (anywhere in the function) from an expression that reads the clock."""
    derived: set[str] = set()
    for _ in range(3):  # names derived from derived names
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and _reads_clock(node.value, derived):
                derived |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return derived


def upper_bounds_on_time(source: str) -> list[int]:
    """Line numbers of asserts that bound a clock reading from above."""
    found = []
    tree = ast.parse(source)
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        derived = _clock_names(function)
        for node in ast.walk(function):
            if not isinstance(node, ast.Assert):
                continue
            for compare in [c for c in ast.walk(node.test) if isinstance(c, ast.Compare)]:
                sides = [compare.left, *compare.comparators]
                for op, left, right in zip(compare.ops, sides, sides[1:]):
                    below = left if isinstance(op, (ast.Lt, ast.LtE)) else right if isinstance(op, (ast.Gt, ast.GtE)) \
                        else None
                    if below is not None and _reads_clock(below, derived):
                        found.append(node.lineno)
    return sorted(set(found))


def test_no_test_asserts_an_upper_bound_on_wall_time():
    offenders = [f"{path.relative_to(TESTS.parent)}:{line}" for path in sorted(TESTS.rglob("*.py"))
                 if not {"fixtures", "golden"} & set(path.relative_to(TESTS).parts)
                 for line in upper_bounds_on_time(path.read_text())]
    assert not offenders, f"timed assertions (wait on an event, a file or an exit instead): {offenders}"


def test_the_check_finds_timed_assertions_and_spares_lower_bounds():
    source = '''
def test_a():
    started = time.monotonic()
    run()
    took = time.monotonic() - started
    assert took < 5
def test_b():
    t0 = time.perf_counter()
    assert 2.0 > time.perf_counter() - t0
def test_c():
    began = time.monotonic()
    assert time.monotonic() - began >= 1.0
def test_d():
    assert len(items) < 5
'''
    assert upper_bounds_on_time(source) == [6, 9]


def fixed_limits(source: str) -> list[int]:
    """Line numbers of calls given ``timeout=<number>`` or ``.wait(<number>)``: a limit that is not
    scaled by DSV4_TEST_SLOWDOWN (write ``limit(seconds)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or getattr(node.func, "id", None) in SCALING_HELPERS:
            continue
        numbers = [k.value for k in node.keywords if k.arg == "timeout"]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("wait", "communicate") and node.args:
            numbers.append(node.args[0])
        if any(isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) for n in numbers):
            found.append(node.lineno)
    return found


def test_every_limit_goes_through_the_slowdown_knob():
    """make_golden.py is no test: it regenerates the golden runs by hand."""
    offenders = [f"{path.name}:{line}" for path in sorted(TESTS.glob("*.py")) if path.name != "make_golden.py"
                 for line in fixed_limits(path.read_text())]
    assert not offenders, f"fixed limits, not scaled by DSV4_TEST_SLOWDOWN (use tests.slowdown.limit): {offenders}"
