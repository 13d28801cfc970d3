"""The research cache (tools/source/research_cache.py) on real SGLang source: a second process answers
from it, and nothing but the same bytes, the same code and a closed scope gets a stored result.

Trees are plain copies whose files carry settled (old) times, as a checkout does some seconds after
``git checkout``, with a cache folder of the test's own."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.cli_helpers import agent
from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
from tools.source import research_cache

DSV4 = "deepseek-ai/DeepSeek-V4-Flash"
HOOK = "srt/arg_groups/speculative_hook.py"


@pytest.fixture(scope="module")
def wheel_copy(tmp_path_factory, sglang_wheel_root) -> Path:
    """The whole 0.5.23 package, copied (not linked: tests here rewrite files in place)."""
    root = tmp_path_factory.mktemp("wheel-copy")
    shutil.copytree(sglang_wheel_root / "sglang", root / "sglang")
    return _settled(root)


@pytest.fixture
def hooks_tree(tmp_path, sglang_wheel_root) -> Path:
    """The part of the package the constraint reader reads: the argument hooks and the dispatcher."""
    package = tmp_path / "tree" / "sglang"
    for rel in ("__init__.py", "srt/arg_groups", "srt/speculative/spec_info.py"):
        source, target = sglang_wheel_root / "sglang" / rel, package / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target) if source.is_dir() else shutil.copy2(source, target)
    return _settled(package.parent)


def _settled(tree: Path) -> Path:
    """Files an hour old, however recently the wheel was unpacked (CI unpacks it at the session's start)."""
    then = time.time() - 3600
    for path in tree.rglob("*.py"):
        os.utime(path, (then, then))
    return tree


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DSV4_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(research_cache.OFF_ENV, raising=False)
    monkeypatch.setattr(research_cache, "stats", research_cache.CacheStats())
    monkeypatch.setattr(research_cache, "_hashed", {})
    return tmp_path / "cache" / "research"


def _constraints(tree: Path):
    return extract_constraints(ExtractConstraintsArgs(root=str(tree), package_dir=str(tree / "sglang")))


def _rewrite_keeping_size_and_times(path: Path, old: bytes, new: bytes) -> None:
    """Same inode, same size, same mtime: what stat data cannot tell from the original."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    with path.open("r+b") as handle:  # in place: no new inode
        handle.write(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_a_second_process_answers_from_the_cache_and_only_for_the_same_bytes(wheel_copy, tmp_path):
    env = {"DSV4_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    mtp = ("mtp", "--sglang", str(wheel_copy), "--model", DSV4, "--json")
    first = agent(*mtp, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    entries = {p.name.split("-")[0]: p for p in (tmp_path / "cache" / "research").glob("*.json")}
    assert set(entries) == {"constraints", "recipes"}
    second = agent(*mtp, cwd=tmp_path, env=env)
    assert json.loads(second.stdout) == json.loads(first.stdout)

    # a stored entry is what the second process reads: one with its rules removed answers differently
    stored = json.loads(entries["constraints"].read_text())
    assert stored["rules"]
    entries["constraints"].write_text(json.dumps({**stored, "rules": []}))
    planted = json.loads(agent(*mtp, cwd=tmp_path, env=env).stdout)
    assert planted["constraints"] == [] and json.loads(first.stdout)["constraints"]

    # the same hook rewritten with equal size and times: its bytes changed, so the planted entry is not used
    _rewrite_keeping_size_and_times(wheel_copy / "sglang" / HOOK, b"speculative", b"Speculative")
    fresh = json.loads(agent(*mtp, cwd=tmp_path, env=env).stdout)
    assert fresh["constraints"], "a changed file must not meet the entry stored for the old bytes"


def test_a_result_equals_the_uncached_one_and_an_edited_extractor_does_not_reuse_it(hooks_tree, cache, monkeypatch):
    monkeypatch.setenv(research_cache.OFF_ENV, "off")
    uncached = _constraints(hooks_tree)
    assert not cache.exists() and research_cache.stats.misses == 0
    monkeypatch.delenv(research_cache.OFF_ENV)
    assert _constraints(hooks_tree) == uncached and research_cache.stats.stored == 1
    assert _constraints(hooks_tree) == uncached and research_cache.stats.hits == 1
    monkeypatch.setattr(research_cache, "code_digest", lambda: "tools changed since")
    assert _constraints(hooks_tree) == uncached
    assert research_cache.stats.misses == 2 and len(list(cache.glob("*.json"))) == 2


def test_a_file_written_moments_ago_is_read_but_not_stored(hooks_tree, cache):
    (hooks_tree / "sglang" / "srt" / "arg_groups" / "fresh.py").write_text("x = 1\n")
    first = _constraints(hooks_tree)
    assert research_cache.stats.misses == 1 and research_cache.stats.stored == 0 and not cache.exists()
    settled = time.time() - 3 * research_cache.RACY_S
    os.utime(hooks_tree / "sglang" / "srt" / "arg_groups" / "fresh.py", (settled, settled))
    assert _constraints(hooks_tree) == first and research_cache.stats.stored == 1


def test_a_damaged_entry_is_read_again_from_the_source(hooks_tree, cache):
    expected = _constraints(hooks_tree)
    (entry,) = cache.glob("*.json")
    entry.write_text('{"rules": [{"torn')
    assert _constraints(hooks_tree) == expected
    assert research_cache.stats.hits == 0 and research_cache.stats.misses == 2
    assert json.loads(entry.read_text())["rules"]  # stored whole again


@pytest.mark.parametrize("beside", ["other_package/__init__.py", "loose_module.py"])
def test_beside_other_python_code_or_with_a_symlink_nothing_is_stored(hooks_tree, cache, beside, tmp_path):
    (hooks_tree / beside).parent.mkdir(exist_ok=True)
    (hooks_tree / beside).write_text("VALUE = 1\n")
    _constraints(hooks_tree)
    assert research_cache.stats.not_cacheable == 1 and beside.split("/")[0] in research_cache.stats.last_reason
    (hooks_tree / beside).unlink()
    (hooks_tree / "sglang" / "srt" / "linked").symlink_to(tmp_path)
    _constraints(hooks_tree)
    assert research_cache.stats.not_cacheable == 2 and "symlink" in research_cache.stats.last_reason
    assert not cache.exists()
