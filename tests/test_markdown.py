"""The one markdown table renderer (tools/markdown.py) and the tables written through it: no cell,
whatever its text, changes a table's shape."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from agent.campaign.llm.flag_guard import FlagReview, FlagVerdict, review_markdown
from tools.markdown import Markdown, markdown_table, md_cell, md_code

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import Row  # noqa: E402
from benchmarks.run_all import table as benchmark_table  # noqa: E402

HOSTILE = "a | b\nc\\|d\x1b[31m\u2028`x`"


def _cells(line: str) -> list[str]:
    """A table row's cells, split as GFM does: on ``|`` not escaped by a backslash."""
    cells, current, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if ch == "|" and not escaped:
            cells.append(current)
            current = ""
        else:
            current += ch
        escaped = ch == "\\" and not escaped
    return [*cells, current]


def _shape(text: str) -> list[int]:
    return [len(_cells(line)) for line in text.splitlines() if line.startswith("|")]


def test_a_hostile_cell_keeps_the_tables_shape():
    text = markdown_table(["a", "b"], [[HOSTILE, md_code(HOSTILE)], [Markdown("**x**"), None]])
    assert _shape(text) == [2, 2, 2, 2]
    assert "\x1b" not in text and "\u2028" not in text and len(text.splitlines()) == 4
    assert "| **x** |" in text  # markdown on purpose passes as it is


def test_a_cell_escapes_pipes_and_backslashes():
    assert md_cell("a|b\\c") == "a\\|b\\\\c"


def test_a_code_span_is_fenced_past_its_own_backticks():
    assert md_code("x") == "`x`"
    assert md_code("a``b") == "```a``b```"
    assert md_code("`x") == "`` `x ``"


def test_a_row_of_the_wrong_width_is_refused():
    try:
        markdown_table(["a"], [["1", "2"]])
    except ValueError as err:
        assert "2 cells for 1 columns" in str(err)
    else:
        raise AssertionError("a row of two cells was written under one column")


def test_the_flag_review_table_escapes_what_the_model_wrote():
    review = FlagReview(catalog_size=3, verdicts=[
        FlagVerdict(flag="--x", value=HOSTILE, claimed_evidence="README.md:1", verdict="rejected", origin=None,
                    reason="no | evidence\nhere")])
    table = [line for line in review_markdown(review).splitlines() if line.startswith("|")]
    assert _shape("\n".join(table)) == [5, 5, 5]


def test_the_benchmark_table_escapes_what_a_benchmark_printed():
    row = Row(benchmark="b", metric=HOSTILE, median=1.0, low=0.5, high=2.0, unit="s", reference="r|s", goal="<= 2",
              ok=False)
    text = benchmark_table([("x.py", "what", [row], 1, ""), ("gpu.py", "real", [], 3, HOSTILE)])
    assert _shape(text) == [6, 6, 6, 6]
    assert "**missed**" in text and "**failed** (exit 3)" in text and "`x.py`" in text


def test_no_other_code_writes_a_table():
    """A table's separator row (``|---|``, ``| --- |``) is written by tools/markdown.py alone."""
    root = Path(__file__).resolve().parents[1]
    separator = re.compile(r"\|\s*:?-{3}|-{3}:?\s*\|")
    writers = []
    for folder in ("agent", "tools", "benchmarks"):
        for path in (root / folder).rglob("*"):
            if path.suffix == ".py" and path != root / "tools" / "markdown.py":
                strings = [n.value for n in ast.walk(ast.parse(path.read_text()))
                           if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            elif path.suffix == ".j2":
                strings = [path.read_text()]
            else:
                continue
            writers += [path.relative_to(root).as_posix() for s in strings if separator.search(s)]
    assert separator.search("|---|") and separator.search("| --- |") and not separator.search("a -- b")
    assert not writers, f"markdown tables written by hand (use tools.markdown.markdown_table): {sorted(set(writers))}"
