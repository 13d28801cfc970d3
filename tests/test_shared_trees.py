"""The suite's shared trees (tests/shared_trees.py): built once however many workers ask, copies whose
files are hard links, and the end-of-module check that catches a write into a shared file."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests import shared_trees


@pytest.fixture
def session(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "session"
    folder.mkdir()
    monkeypatch.setenv(shared_trees.SESSION_DIR_ENV, str(folder))
    yield folder
    shared_trees._linked_this_module.clear()  # this test's trees are not the module's business


def _build(calls: list[int]):
    def build(tree: Path) -> None:
        calls.append(1)
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "a.py").write_text("A = 1\n")
        (tree / "b.txt").write_text("b\n")
    return build


def test_a_tree_is_built_once_for_every_asker_and_copies_share_its_files(session, tmp_path):
    calls: list[int] = []
    trees = []
    askers = [threading.Thread(target=lambda: trees.append(shared_trees.shared_tree("t", _build(calls))))
              for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert calls == [1] and len(set(trees)) == 1
    copy = shared_trees.linked_copy(trees[0], tmp_path / "copy")
    assert os.path.samefile(copy / "pkg" / "a.py", trees[0] / "pkg" / "a.py")
    shared_trees.check_untouched()  # nothing written


def test_renaming_a_new_file_in_is_fine_and_writing_in_place_is_caught(session, tmp_path):
    tree = shared_trees.shared_tree("t", _build([]))
    copy = shared_trees.linked_copy(tree, tmp_path / "copy")
    fresh = copy / "pkg" / "a.py.tmp"
    fresh.write_text("A = 2\n")
    os.replace(fresh, copy / "pkg" / "a.py")  # how the agent and git write
    (copy / "pkg" / "new.py").write_text("")
    shared_trees.check_untouched()
    assert (tree / "pkg" / "a.py").read_text() == "A = 1\n"

    shared_trees.linked_copy(tree, tmp_path / "copy2")
    with open(tmp_path / "copy2" / "b.txt", "a") as f:
        f.write("appended in place\n")
    with pytest.raises(AssertionError, match=r"wrote in place.*b\.txt"):
        shared_trees.check_untouched()


def test_copy_over_replaces_linked_files_without_writing_into_them(session, tmp_path):
    tree = shared_trees.shared_tree("t", _build([]))
    copy = shared_trees.linked_copy(tree, tmp_path / "copy")
    overlay = tmp_path / "overlay"
    (overlay / "pkg").mkdir(parents=True)
    (overlay / "pkg" / "a.py").write_text("A = 3\n")
    shared_trees.copy_over(overlay, copy)
    assert (copy / "pkg" / "a.py").read_text() == "A = 3\n"
    assert (tree / "pkg" / "a.py").read_text() == "A = 1\n"
    shared_trees.check_untouched()


def test_a_build_that_failed_is_built_again(session):
    def broken(tree: Path) -> None:
        tree.mkdir()
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        shared_trees.shared_tree("t", broken)
    calls: list[int] = []
    tree = shared_trees.shared_tree("t", _build(calls))
    assert calls == [1] and (tree / "b.txt").exists()
