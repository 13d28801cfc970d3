"""search(): which hits survive a max_hits cut is fixed (first by path, then line), whichever engine runs.
Path order is the order of a walk that visits each folder's entries by name (``rg --sort path``):
``pkg/b.py`` before ``pkg-x.py``, though ``-`` sorts before ``/`` as a string.

Real ripgrep (the ``rg`` of the ripgrep wheel) over a real temporary tree; rg walks it with
several threads, so the arrival order of hits varies between runs while the result must not.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_binary
from tools.source.search import SearchArgs, find_rg, path_order, search

# names where the order of a directory walk and the order of path strings disagree:
# "pkg/b.py" comes after "pkg.py" and "pkg-x.py" as strings ('.' and '-' sort before '/') but a walk
# visits the folder "pkg" before either; the walk's order is the one kept.
TRICKY = ["pkg.py", "pkg-x.py", "pkg0.py", "pkg/b.py", "pkg/a/z.py", "pkg a.py", "Pkg.py", "é.py", ".hidden/h.py"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("search_tree")
    names = TRICKY + [f"d{i % 7}/sub{i % 3}/f{i:03d}.py" for i in range(180)]
    for n, name in enumerate(names):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # one to three hits per file, on lines that differ per file
        path.write_text("".join("needle here\n" if (line + n) % 4 == 0 else "hay\n" for line in range(12)))
    return root


def _keys(result) -> list[tuple[str, int]]:
    return [(h.path, h.line) for h in result.hits]


def _walked(keys: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return sorted(keys, key=lambda k: (path_order(k[0]), k[1]))


def test_path_order_is_a_walks_not_a_strings():
    assert sorted(["pkg.py", "pkg/b.py", "pkg-x.py", "pkg0.py", "pkg a.py"], key=path_order) == \
        ["pkg/b.py", "pkg a.py", "pkg-x.py", "pkg.py", "pkg0.py"]


@pytest.mark.parametrize("max_hits", [1, 5, 37, 250])
def test_cut_keeps_the_first_hits_by_path_then_line(tree, max_hits):
    require_binary(find_rg() or "rg")
    full = search(SearchArgs(pattern="needle", root=str(tree), max_hits=5000))
    assert not full.truncated and len(full.hits) > 500
    expected = _walked(_keys(full))[:max_hits]
    assert _keys(full)[:max_hits] == expected
    for _ in range(4):  # parallel walks: repeat to give a nondeterministic cut a chance to show
        cut = search(SearchArgs(pattern="needle", root=str(tree), max_hits=max_hits))
        assert cut.engine == "rg" and cut.truncated and f"max_hits={max_hits}" in cut.note
        assert _keys(cut) == expected
    fallback = search(SearchArgs(pattern="needle", root=str(tree), max_hits=max_hits), rg="")
    assert fallback.engine == "python" and fallback.truncated and _keys(fallback) == expected
    assert [h.text for h in cut.hits] == ["needle here"] * max_hits


def test_files_only_cut_is_by_path_and_engines_agree(tree):
    require_binary(find_rg() or "rg")
    everything = search(SearchArgs(pattern="needle", root=str(tree), files_only=True, max_hits=5000))
    assert len(everything.hits) == len(TRICKY) + 180
    assert {"pkg/b.py", "é.py", ".hidden/h.py", "pkg a.py"} <= {h.path for h in everything.hits}
    names = sorted((h.path for h in everything.hits), key=path_order)
    for _ in range(3):
        cut = search(SearchArgs(pattern="needle", root=str(tree), files_only=True, max_hits=6))
        assert cut.truncated and [h.path for h in cut.hits] == names[:6]
        assert all(h.line == 0 and h.text == "" for h in cut.hits)
    fallback = search(SearchArgs(pattern="needle", root=str(tree), files_only=True, max_hits=6), rg="")
    assert [h.path for h in fallback.hits] == names[:6]


def test_no_cut_when_hits_fit_exactly(tree):
    require_binary(find_rg() or "rg")
    full = search(SearchArgs(pattern="needle", root=str(tree), max_hits=5000))
    exact = search(SearchArgs(pattern="needle", root=str(tree), max_hits=len(full.hits)))
    assert not exact.truncated and exact.note == "" and _keys(exact) == _keys(full)


def test_paths_with_colons_and_odd_lines_parse(tmp_path):
    """The plain rg output is path NUL line ':' text: a ':' in a name or a line must not split wrongly."""
    require_binary(find_rg() or "rg")
    (tmp_path / "a:b.py").write_text("x = 'needle: 12:34'\n")
    (tmp_path / "latin.py").write_bytes(b"needle \xff\xfe bytes\n")
    (tmp_path / "crlf.py").write_bytes(b"first\r\nneedle crlf\r\n")
    result = search(SearchArgs(pattern="needle", root=str(tmp_path)))
    by_path = {h.path: h for h in result.hits}
    assert by_path["a:b.py"].line == 1 and by_path["a:b.py"].text == "x = 'needle: 12:34'"
    assert by_path["latin.py"].text.startswith("needle ") and by_path["latin.py"].text.endswith(" bytes")
    assert by_path["crlf.py"].line == 2 and by_path["crlf.py"].text.rstrip("\r") == "needle crlf"
    fallback = search(SearchArgs(pattern="needle", root=str(tmp_path)), rg="")
    assert [(h.path, h.line) for h in fallback.hits] == [(h.path, h.line) for h in result.hits]


def test_output_read_in_pieces_loses_no_line(tmp_path):
    """rg's output is parsed a piece at a time as it comes: lines that straddle two reads (long
    lines, one line longer than a read) come back whole, each hit once."""
    require_binary(find_rg() or "rg")
    long_line = "needle " + "x" * 200_000  # longer than one read of the pipe
    lines = [f"needle {i} " + "y" * (97 + i % 211) for i in range(3000)]  # ~0.5 MB of output
    (tmp_path / "many.py").write_text("\n".join(lines[:1500] + [long_line] + lines[1500:]) + "\n")
    result = search(SearchArgs(pattern="needle", root=str(tmp_path), max_hits=5000))
    assert not result.truncated and len(result.hits) == 3001
    assert [h.line for h in result.hits] == list(range(1, 3002))
    assert result.hits[1500].text == long_line[:300]
    assert [h.text for h in result.hits[:1500] + result.hits[1501:]] == [line[:300] for line in lines]
    cut = search(SearchArgs(pattern="needle", root=str(tmp_path), max_hits=2000))
    assert cut.truncated and [h.line for h in cut.hits] == list(range(1, 2001))
