"""The suite's own scheduling (tests/xdist_groups.py): tests sharing a module-scoped fixture run on one
xdist worker, so the fixture is built once; the other tests still spread over the workers; the
longest unit by the durations file goes out first, and ``--update-durations`` rewrites that file.

Runs a real pytest with three xdist workers on a small suite in a temp folder, using this repository's
conftest hooks. With xdist's stock ``loadgroup`` on pytest 9, the three fixture users land on three
workers (one scope each, handed out one per worker) and the fixture is built three times."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.slowdown import limit

REPO = Path(__file__).resolve().parents[1]

SUITE = '''
import os
from pathlib import Path

import pytest

LOG = Path(os.environ["GROUPING_LOG"])


def note(what, n=""):
    with LOG.open("a") as f:
        f.write(f"{what}{n} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.fixture(scope="module")
def expensive():
    note("built")
    return 1


@pytest.mark.parametrize("n", range(3))
def test_uses_the_fixture(expensive, n):
    note("user")


@pytest.mark.parametrize("n", range(6))
def test_free(n):
    note("free", n)
'''

CONFTEST = '''
from tests.xdist_groups import (pytest_addoption, pytest_configure_node, pytest_runtest_logreport,
                                pytest_sessionfinish, pytest_unconfigure, pytest_xdist_make_scheduler, record_groups)


def pytest_collection_modifyitems(config, items):
    record_groups(config, items)
'''


def test_a_module_fixture_is_built_once_free_tests_spread_and_the_longest_goes_first(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_small.py").write_text(SUITE)
    log = tmp_path / "log.txt"
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"test_small.py::test_free[5]": 100.0}))  # last in collection order
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "GROUPING_LOG": str(log), "HOME": str(tmp_path),
           "DSV4_TEST_DURATIONS": str(durations),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # xdist alone (-p xdist), not every plugin of the venv
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "no:cacheprovider", "-n", "3",
                           "--dist", "loadgroup", "-c", "/dev/null", "--rootdir", str(suite), str(suite),
                           "--basetemp", str(tmp_path / "basetemp"), "--update-durations"],  # else it prunes the outer suite's old temp roots
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=limit(300))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in log.read_text().splitlines()]
    built = [worker for what, worker in lines if what == "built"]
    users = {worker for what, worker in lines if what == "user"}
    assert len(built) == 1, lines  # once, not once per worker
    assert users == set(built), lines  # every user ran where it was built
    assert sum(what.startswith("free") for what, _ in lines) == 6
    assert len({worker for _, worker in lines}) > 1, lines  # the free tests were not serialised with them
    longest = next(worker for what, worker in lines if what == "free5")
    assert next(what for what, worker in lines if worker == longest) == "free5", lines  # its worker began with it
    measured = json.loads(durations.read_text())
    assert len(measured) == 9 and all(isinstance(v, float) for v in measured.values()), measured
