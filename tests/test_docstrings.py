"""Docstrings and comments in agent/ and tools/ say what and why in a few lines: no module's prose
(docstrings and comments) takes more than MAX_SHARE of its source, and none carries a timing figure,
which goes stale (timings belong in benchmarks/ and docs/benchmarks.md); nor does the README."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "tools")
MAX_SHARE = 0.40
FEW_LINES = 800  # characters of prose any module may have, whatever its size (about eight lines)

# "~0.5 s", "0.31 s", "60 ms", "about 11 s", "0.21 core-s"; not "'90s'" (a quoted example input) nor "0.5.23"
TIMING = re.compile(r"(?<![\w.'\"`-])~?\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hours?|core-s)\b")



def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every docstring (module, class, function) and comment in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.append((first.lineno, first.value.value))
    found += [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type == tokenize.COMMENT]
    return found


def _only_a_docstring(path: Path, source: str) -> bool:
    body = ast.parse(source).body
    return path.name == "__init__.py" and len(body) == 1 and isinstance(body[0], ast.Expr)


def _modules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text()
            for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def too_long(source: str) -> float | None:
    """The prose share of ``source`` when it is over the limit, else None."""
    chars = sum(len(text) for _, text in prose(source))
    share = chars / max(len(source), 1)
    return share if chars > FEW_LINES and share > MAX_SHARE else None


def timings(source: str) -> list[str]:
    return [f"{line + text[:m.start()].count(chr(10))}: {m.group(0)}"
            for line, text in prose(source) for m in TIMING.finditer(text)]


def test_the_checks_see_docstrings_comments_and_timings():
    code = "x = 1\n" * 20
    assert too_long(f'"""{"why " * 300}"""\n{code}') is not None
    assert too_long(f'"""A few lines."""\n{code}') is None
    assert too_long(f'def f():\n    """{"why " * 300}"""\n{code}') is not None
    assert too_long(f'{"# why " * 200}\n{code}') is not None
    assert timings('"""Fast.\n\nImporting it takes ~0.5 s."""\n') == ["3: ~0.5 s"]
    assert timings("x = 1  # 60 ms per call, 0.21 core-s\n") == ["1: 60 ms", "1: 0.21 core-s"]
    assert timings('"""\'7d\', \'90s\' -> seconds; the 0.5.23 wheel; 8 GPUs; 95 % interval."""\n') == []


def test_no_module_is_mostly_prose():
    long = {path: f"{share:.0%}" for path, source in _modules().items()
            if not _only_a_docstring(Path(path), source)
            and (share := too_long(source)) is not None}
    assert not long, (f"docstrings and comments over {MAX_SHARE:.0%} of the module: {long}; say what and why "
                      "in a few lines, no history, no restating the code")


def test_no_timing_figures_in_docstrings_or_comments():
    found = {path: hits for path, source in _modules().items()
             if (hits := timings(source))}
    assert not found, f"timing figures go stale; move them to benchmarks/ or docs/benchmarks.md: {found}"


def test_no_timing_figures_in_the_readme():
    found = [m.group(0) for m in TIMING.finditer((ROOT / "README.md").read_text())]
    assert not found, f"README.md carries timing figures {found}; they belong in docs/benchmarks.md"
