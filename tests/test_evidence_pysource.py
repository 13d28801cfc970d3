"""The evidence engine's parse cache, GC pause and launcher line index (tools/source/pysource.py), on real files.

The line index only lets the engine skip walking code that cannot hold a server launch; these
tests pin the cases where text and tree could disagree (decorators, non-ASCII identifiers, lone
``\\r`` line ends) by running the real recipe extraction over files written for them.
"""
from __future__ import annotations

import ast
import gc
import os

import pytest

from tools.source import pysource
from tools.recipes import ExtractRecipesArgs, extract_recipes
from tools.recipes.modules import LAUNCHER


def test_cache_follows_content_not_mtime(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("A = 1\n")
    first, _ = pysource.parse_file(path)
    assert pysource.parse_file(path)[0] is first  # same bytes: the cached tree
    stat = path.stat()
    path.write_text("A = 2\n")  # same size; force the old timestamps back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second, text = pysource.parse_file(path)
    assert second is not first and text == "A = 2\n"
    assert ast.unparse(second) == "A = 2"


def test_syntax_errors_still_raise_and_are_not_cached(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("def broken(:\n")
    for _ in range(2):
        with pytest.raises(SyntaxError):
            pysource.parse_file(path)


def test_cache_is_bounded_by_characters(tmp_path):
    cache = pysource.TreeCache(max_chars=50)
    trees = []
    for n in range(5):
        path = tmp_path / f"f{n}.py"
        path.write_text(f"VALUE_{n} = {'1' * 10}\n")  # 20 characters each
        trees.append(cache.parse(path)[0])
    assert sum(map(len, cache.texts())) <= 50 and len(cache.texts()) == 2
    assert cache.parse(tmp_path / "f4.py")[0] is trees[4]      # most recent kept
    assert cache.parse(tmp_path / "f0.py")[0] is not trees[0]  # oldest evicted, parsed again
    cache.clear()
    assert cache.texts() == []


def test_gc_paused_restores_the_collector_state():
    assert gc.isenabled()
    with pysource.gc_paused():
        assert not gc.isenabled()
        with pysource.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block must not re-enable it
    assert gc.isenabled()
    gc.disable()
    try:
        with pysource.gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), pysource.gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_line_index_spans_and_declines():
    text = "@launch_server_deco\ndef f():\n    pass\n\n\ndef g():\n    popen_launch_server(x)\n"
    index = pysource.LineIndex(text, LAUNCHER)
    assert index.lines == [1, 7]
    f, g = ast.parse(text).body
    assert index.may_contain(f)  # only its decorator names a launcher: still a candidate
    assert index.may_contain(g)
    assert not index.may_contain(f.body[0])
    assert pysource.LineIndex("x = 'é'\n", LAUNCHER).lines is None
    assert pysource.LineIndex("a = 1\rlaunch_server()\n", LAUNCHER).lines is None
    assert pysource.LineIndex("a = 1\r\nb = 2\r\n", LAUNCHER).lines is None


SERVER_TEST = '''{prefix}
from sglang.test.test_utils import popen_launch_server


class {name}:
    @classmethod
    def setUpClass(cls):
        cls.process = {launcher}(
            "acme/Moe-7B", "http://127.0.0.1:1", other_args=["--speculative-algorithm", "EAGLE"])
'''


@pytest.mark.parametrize("prefix, launcher", [
    ("", "popen_launch_server"),                      # plain ASCII: the index is used
    ("# modèle de test", "popen_launch_server"),       # non-ASCII: the index declines, trees are walked
    ("X = 1\rY = 2", "popen_launch_server"),          # a lone \r ends a line for Python
    ("", "popen_ｌaunch_server"),                       # NFKC: the tree says popen_launch_server
])
def test_launches_are_found_whatever_the_text_looks_like(tmp_path, prefix, launcher):
    package = tmp_path / "sglang"
    (package / "test").mkdir(parents=True)
    (package / "test" / "test_utils.py").write_text("def popen_launch_server(*a, **k):\n    pass\n")
    (package / "test" / "test_acme.py").write_text(
        SERVER_TEST.format(prefix=prefix, name="TestAcme", launcher=launcher), newline="")
    result = extract_recipes(ExtractRecipesArgs(root=str(tmp_path), package_dir=str(package)))
    found = {(r.name, r.model, r.flags.get("--speculative-algorithm")) for r in result.recipes}
    assert ("sglang/test/test_acme.py::TestAcme", "acme/Moe-7B", "EAGLE") in found, result
