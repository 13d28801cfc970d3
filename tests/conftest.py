"""Shared test fixtures.

``sglang_wheel_root``: the real sglang 0.5.23 wheel from PyPI, downloaded once into the cache
(``DSV4_CACHE_DIR``, default ``~/.cache/dsv4-agent``) and unpacked; used as a read-only corpus.
"""
from __future__ import annotations

import atexit
import compileall
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests import shared_trees
from tests.slowdown import slowdown
from tests.xdist_groups import (  # noqa: F401 - hooks, found here by pytest
    pytest_addoption, pytest_configure_node, pytest_runtest_logreport, pytest_sessionfinish, pytest_xdist_make_scheduler,
    record_groups)
from tests.xdist_groups import pytest_unconfigure as xdist_groups_unconfigure

SGLANG_TEST_VERSION = "0.5.23"
_SHARED_TREES = pytest.StashKey[Path]()
REPO = Path(__file__).resolve().parents[1]

# The doubles of the SGLang interpreter (tests/doubles/sglang_python, argv_dump) run their Python
# parts with the interpreter running the tests, whatever venv that is; jobs inherit this.
os.environ["DSV4_DOUBLE_REAL_PYTHON"] = sys.executable

# What the agent records outside run folders (config files allowed, kernel configs installed) goes to
# a folder of this process's, never to the user's own ~/.local/state/dsv4-agent.
# Removed when this process ends: one per pytest process, they piled up in RAM (/dev/shm) run after run.
os.environ["DSV4_STATE_DIR"] = tempfile.mkdtemp(prefix="dsv4-state-")
atexit.register(shutil.rmtree, os.environ["DSV4_STATE_DIR"], ignore_errors=True)

# The git repositories tests build hold a whole SGLang tree as loose objects: enough for the
# `git gc --auto` after their first commit to repack each one (seconds of CPU per repository that
# lives a minute). Switched off for every git the tests start, through git's environment config.
_git_configs = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
os.environ.update({"GIT_CONFIG_COUNT": str(_git_configs + 1), f"GIT_CONFIG_KEY_{_git_configs}": "gc.auto",
                   f"GIT_CONFIG_VALUE_{_git_configs}": "0"})


def require_binary(name: str) -> str:
    """The path of a system binary a test needs; skip locally, fail in CI (CI installs it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (.ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def service_running(pid_file: Path) -> bool:
    """Whether the daemon whose pid file this is (started by .ci/run or a fixture) is alive."""
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False


def pytest_collection_modifyitems(config, items):
    """Under xdist (pyproject's addopts), tests sharing an expensive module-scoped fixture run on one
    worker (tests/xdist_groups.py). Every test's pytest-timeout limit (its own mark, else
    ``--timeout``, else pyproject's) is scaled by DSV4_TEST_SLOWDOWN (tests/slowdown.py)."""
    record_groups(config, items)
    _scale_timeouts(config, items)


def _scale_timeouts(config, items) -> None:
    default = config.getoption("timeout", None) or config.getini("timeout")
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = float((mark.args[0] if mark.args else mark.kwargs.get("timeout", default)) if mark else default or 0)
        if seconds > 0:  # 0: no limit
            item.add_marker(pytest.mark.timeout(seconds * slowdown()), append=False)  # before the own mark: read first


def pytest_collection_finish(session):
    """What collection imported (pytest, the agent, LangGraph, pydantic's models) lives as long as the
    process: left out of the collector's full passes, which walked it again and again in campaigns run
    in the worker's process (measured: 13 % of the workers' CPU went to collecting)."""
    gc.collect()
    gc.freeze()


def pytest_configure(config):
    try:
        slowdown()
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist: workers inherit the folder
        _temporary_files_in_memory()
        config.stash[_SHARED_TREES] = shared_trees.start_session()
        _cache_bytecode()
    config.addinivalue_line("markers", "no_replay(reason): the runs this test makes are not replayable on purpose "
                                       "(a trace line deleted, a hand-made run folder); the reason says why")


def _temporary_files_in_memory() -> None:
    """The suite's temporary folders (pytest's, the shared trees, every process's TMPDIR) in RAM, on
    /dev/shm, where the machine has room there; an explicit TMPDIR wins.

    The agent fsyncs every trace event and checkpoint, as it should; on this machine's virtual disk
    the suite's load made fsyncs and cold reads stall for seconds (one run spent a minute in I/O
    wait, another left 245 core-seconds idle), which says nothing about the code under test. Kills,
    resumes and replays behave the same on tmpfs: no test depends on data surviving a power cut."""
    if os.environ.get("TMPDIR"):
        return
    memory = Path("/dev/shm")
    try:
        room = os.statvfs(memory)
    except OSError:
        return
    if room.f_bavail * room.f_frsize >= 4 << 30 and os.access(memory, os.W_OK):
        os.environ["TMPDIR"] = str(memory)
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def _cache_bytecode() -> None:
    """Bytecode of the repository's modules, compiled once before the workers start.

    Some environments (CI images, sandboxes) set PYTHONDONTWRITEBYTECODE: then each of the suite's
    ~300 Python processes (workers, agents, doubles) compiled the agent again, about 0.1 s of CPU for
    a campaign's imports and 1.3 s for a worker's collection. A user's install caches bytecode, and so
    do the suite's processes now: they inherit the environment without that variable. Only our own
    folders are compiled here; tests/fixtures and tests/golden hold SGLang-shaped data, left alone."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    for folder, depth in ((REPO / "agent", 10), (REPO / "tools", 10), (REPO / "tests", 0), (REPO / "tests" / "doubles", 0)):
        compileall.compile_dir(folder, maxlevels=depth, quiet=1)


def pytest_unconfigure(config):
    xdist_groups_unconfigure(config)
    if _SHARED_TREES in config.stash:
        shared_trees.end_session(config.stash[_SHARED_TREES])
    # A worker ends holding millions of objects (parsed SGLang sources, graphs of in-process runs). The
    # interpreter's last collection walked them for seconds per worker, four workers on two cores, and
    # xdist kills a worker that takes over 10 s to exit: the suite sat at its end. Frozen objects are
    # left out of that walk, and nothing that matters is left to collect by now.
    gc.freeze()


@pytest.fixture(scope="module", autouse=True)
def shared_trees_stay_untouched():
    """The trees tests share through hard links (tests/shared_trees.py) were not written into."""
    yield
    shared_trees.check_untouched()


_REPLAYED: set[Path] = set()  # runs of this worker already replayed (module fixtures' runs are met once)


@pytest.fixture(autouse=True)
def every_finished_run_replays(request, tmp_path_factory):
    """After each test, every run the suite made that has a result.json (finished, planned, failed,
    interrupted, resumed or not) must replay to exit 0: replay is the proof that the record is whole.
    Runs live at ``<test dir>/runs/<id>`` (one or two folders below the worker's temp root); a folder
    without trace.jsonl was made by hand by a test, not by a campaign."""
    yield
    root = tmp_path_factory.getbasetemp()
    # resolved: pytest links "<test name>current" to each test's latest folder, and the glob follows it
    found = {p.parent.resolve() for pattern in ("*/runs/*/result.json", "*/*/runs/*/result.json")
             for p in root.glob(pattern)
             if (p.parent / "trace.jsonl").exists()}  # no trace: a folder a test made by hand, not a campaign
    fresh = sorted(found - _REPLAYED)
    _REPLAYED.update(fresh)
    if not fresh or request.node.get_closest_marker("no_replay"):
        return
    from agent.exit_codes import ExitCode
    from agent.replay.driver import replay_run

    for run in fresh:
        report = replay_run(run)
        assert report.exit_code == ExitCode.DONE, f"the run {run} does not replay:\n{report.render()}"


@pytest.fixture(scope="session")
def sglang_wheel_root() -> Path:
    from tools.source.resolve import ensure_wheel_source

    return ensure_wheel_source(SGLANG_TEST_VERSION)


# Every real checkpoint config in ../shared/checkpoints (its README says what each holds)
CHECKPOINT_NAMES = ["DeepSeek-V3", "DeepSeek-V3.2", "DeepSeek-V4-Flash", "DeepSeek-V4-Flash_rev-60d8d707",
                    "DeepSeek-V4-Flash-0731", "0xSero--DeepSeek-V4-Flash-0731-REAP", "DeepSeek-V4-Pro",
                    "DeepSeek-V4-Pro-0813", "DeepSeek-V4.1-Flash"]


def shared_checkpoints() -> Path:
    """``shared/checkpoints`` next to the repository (CI: ../shared) or next to a folder above it."""
    root = Path(__file__).resolve().parents[1]
    for folder in (root, *root.parents):
        if (folder / "shared" / "checkpoints" / "README.md").is_file():
            return folder / "shared" / "checkpoints"
    missing("no shared/checkpoints next to the repository (CI provides it at ../shared)")


def missing(message: str):
    """Skip locally; under CI=true fail, since .ci/run provides what the test needs."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def shared_corpus() -> Path | None:
    """``shared/corpus`` next to the repository (CI: ../shared) or next to a folder above it (a worktree)."""
    root = Path(__file__).resolve().parents[1]
    for folder in (root, *root.parents):
        corpus = folder / "shared" / "corpus"
        if (corpus / "build-checkout.sh").is_file():
            return corpus
    return None


@pytest.fixture(scope="module")
def corpus_checkouts(tmp_path_factory, sglang_wheel_root) -> dict[str, Path]:
    """The upstream corpus laid over the 0.5.23 wheel as git checkouts: "new" (the wheel's own hooks
    with the registered tests) and "old" (--with-older-python: older hooks and runners too). Built
    once per session (tests/shared_trees.py); the module gets its own hard-linked copies."""
    corpus = shared_corpus()
    if corpus is None:
        missing("no shared/corpus found next to the repository (CI provides it at ../shared)")
    base = tmp_path_factory.mktemp("corpus")
    return {name: shared_trees.linked_copy(shared_trees.corpus_checkout(corpus, sglang_wheel_root, name == "old"),
                                           base / name)
            for name in ("new", "old")}


@pytest.fixture(scope="session")
def sglang_python() -> Path:
    """The separate venv with the real sglang 0.5.23 from PyPI (never the agent's own), made by .ci/run."""
    import subprocess

    from tools.source.resolve import cache_dir

    venv = Path(os.environ.get("DSV4_SGLANG_VENV") or cache_dir() / "sglang-venv")
    python = venv / "bin" / "python"
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    if not (venv / ".dsv4-complete").is_file() or not python.is_file() \
            or subprocess.run([str(python), "-c", probe], capture_output=True).returncode != 0:
        missing(f"no sglang venv at {python.parent.parent} (.ci/run creates it: sglang=={SGLANG_TEST_VERSION})")
    return python


# The session's one-node Slurm, one fixture for every module that uses it (tests/slurm_cluster.py).
from tests.slurm_cluster import slurm  # noqa: E402, F401
