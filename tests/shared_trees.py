"""Big trees the tests build once per session and hand out as hard-linked copies.

A real copy of the SGLang 0.5.23 package is 131 MB in 5,790 files: 2.4 s of kernel CPU to write,
and gigabytes of disk writes over a suite that makes forty of them. A corpus checkout
(``shared/corpus/build-checkout.sh``: the package plus the upstream overlay, committed with git)
costs 9 s. Here each tree is built once per session, by whichever xdist worker asks first (the
others wait on a lock), and every test gets its own copy whose files are hard links to it (0.3 s).

A hard-linked copy behaves as a copy for everything that writes a file whole, as git and the agent
do (a temporary file, then a rename: a new inode). Only an in-place write (open for writing, append,
``shutil.copy2`` onto an existing file) would reach the shared tree and every other test's copy.
So each shared tree is checked at the end of every module that linked it: a file whose size or
mtime changed fails that module, naming the file.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.slowdown import limit

SESSION_DIR_ENV = "DSV4_TEST_SHARED_TREES"  # set by tests/conftest.py on the controller; workers inherit it
_SNAPSHOT = "snapshot.json"
_linked_this_module: set[Path] = set()
_built: dict[Path, dict] = {}  # tree -> its snapshot as built, read once per process


def start_session() -> Path:
    """On the controller (or a run without xdist): the folder the session's shared trees live in."""
    folder = Path(tempfile.mkdtemp(prefix="dsv4-shared-trees-"))
    os.environ[SESSION_DIR_ENV] = str(folder)
    return folder


def end_session(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)  # the tests' copies keep their files: links, not references


def shared_tree(name: str, build: Callable[[Path], None]) -> Path:
    """The tree ``name``, built by ``build(folder)`` the first time any worker of the session asks."""
    if SESSION_DIR_ENV not in os.environ:
        raise RuntimeError(f"{SESSION_DIR_ENV} is not set: tests/conftest.py sets it for a pytest session; "
                           "outside pytest, set it to an empty folder")
    base = Path(os.environ[SESSION_DIR_ENV]) / name
    tree = base / "tree"
    with open(base.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait here while the first one builds
        if not (base / _SNAPSHOT).exists():
            shutil.rmtree(base, ignore_errors=True)  # a build that failed half-way
            base.mkdir()
            build(tree)
            (base / _SNAPSHOT).write_text(json.dumps(_stat_all(tree)))
    return tree


def linked_copy(tree: Path, dest: Path) -> Path:
    """``dest`` becomes a copy of the shared ``tree`` whose files are hard links to it (real copies where
    ``dest`` is on another file system, e.g. a ``--basetemp`` elsewhere)."""
    shutil.copytree(tree, dest, symlinks=True, copy_function=_link_or_copy)
    _linked_this_module.add(tree)
    return dest


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        shutil.copy2(source, target)


def copy_over(source: Path, dest: Path) -> None:
    """Lay ``source`` over a linked copy: a file already there is unlinked first, never written into."""
    for path in sorted(source.rglob("*")):
        target = dest / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.unlink(missing_ok=True)
        shutil.copy2(path, target)


def check_untouched() -> None:
    """At the end of a module: every shared tree it linked is as it was built."""
    trees = sorted(_linked_this_module)
    _linked_this_module.clear()
    for tree in trees:
        if tree not in _built:
            _built[tree] = json.loads((tree.parent / _SNAPSHOT).read_text())
        built, now = _built[tree], _stat_all(tree)
        changed = sorted(rel for rel in built.keys() | now.keys() if built.get(rel) != now.get(rel))
        assert not changed, (
            f"a test of this module wrote in place into hard-linked files of the shared tree {tree} "
            f"(tests/shared_trees.py): {changed[:5]}; write a new file and rename it over the old one")


def _stat_all(tree: Path) -> dict[str, list[int]]:
    found = {}
    for folder, _dirs, files in os.walk(tree):
        for name in files:
            path = os.path.join(folder, name)
            stat = os.lstat(path)
            found[os.path.relpath(path, tree)] = [stat.st_size, stat.st_mtime_ns]
    return found


def sglang_package(wheel_root: Path) -> Path:
    """The wheel's ``sglang/`` package folder (a real copy: the cache itself is never linked)."""
    return shared_tree("sglang-package", lambda tree: shutil.copytree(wheel_root / "sglang", tree, symlinks=True))


def corpus_checkout(corpus: Path, wheel_root: Path, older_hooks: bool) -> Path:
    """``build-checkout.sh`` of the upstream corpus over the wheel: a git checkout with one commit.
    ``older_hooks``: ``--with-older-python``, the overlay's older hook and runner files too."""
    def build(tree: Path) -> None:
        extra = ["--with-older-python"] if older_hooks else []
        subprocess.run(["bash", str(corpus / "build-checkout.sh"), *extra, str(tree), str(wheel_root)],
                       check=True, capture_output=True, timeout=limit(300))

    return shared_tree("corpus-old" if older_hooks else "corpus-new", build)
