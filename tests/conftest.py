"""Shared test fixtures.

``sglang_wheel_root``: the real sglang 0.5.23 wheel from PyPI, downloaded once into the cache
(``DSV4_CACHE_DIR``, default ``~/.cache/dsv4-agent``) and unpacked; used as a read-only corpus.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

SGLANG_TEST_VERSION = "0.5.23"

# The doubles of the SGLang interpreter (tests/doubles/sglang_python, argv_dump) run their Python
# parts with the interpreter running the tests, whatever venv that is; jobs inherit this.
os.environ["DSV4_DOUBLE_REAL_PYTHON"] = sys.executable


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
    """Under xdist (pyproject's addopts), tests sharing an expensive module-scoped fixture (a whole
    campaign, a measured sweep) run on one worker, so the fixture is built once, not once per
    worker (``--dist loadgroup``); an explicit ``xdist_group`` mark (e.g. the one Slurm cluster) wins."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        defs = getattr(item, "_fixtureinfo", None)
        shared = sorted(name for name, chain in (defs.name2fixturedefs.items() if defs else ())
                        if chain and chain[-1].scope == "module")
        if shared:
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{shared[0]}"))


@pytest.fixture(scope="session")
def sglang_wheel_root() -> Path:
    from tools.source.resolve import ensure_wheel_source

    return ensure_wheel_source(SGLANG_TEST_VERSION)
