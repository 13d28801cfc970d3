"""One worker per expensive fixture: the tests that share a module-scoped fixture (a whole campaign,
a measured sweep) run together on one xdist worker, so the fixture is built once, not once per worker.

pytest-xdist 3.8's own ``--dist loadgroup`` folds ``xdist_group`` marks into the node ids by writing
``item._nodeid``, an attribute pytest 9 no longer reads: the marks are silently ignored and each
worker that meets a grouped test builds the fixture again (the decision campaign was built twice per
suite, 100 s each). Here the workers, which know each test's fixtures and marks, write the group of
every test to a file; the controller's scheduler, which sees only node ids, reads it.

The longest units go out first (tests/durations.json: seconds per test from an earlier run of the
suite; ``pytest --update-durations`` rewrites it). Handed out in collection order, a two-minute group
that starts last keeps one worker busy while the others idle. The file only orders the work: a test
it does not know counts as one second, and a stale figure changes nothing but the order.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

DURATIONS = Path(os.environ.get("DSV4_TEST_DURATIONS") or Path(__file__).with_name("durations.json"))
UNKNOWN_DURATION_S = 1.0
_GROUPS_KEY = "dsv4_groups_dir"  # workerinput key: the folder the workers write their groups to
_GROUPS_DIR = pytest.StashKey[str]()  # the same folder, on the controller


def group_of(item: pytest.Item) -> str | None:
    """An explicit ``xdist_group`` mark (e.g. the one Slurm cluster), else the first module-scoped
    fixture the test uses, else none: the test may run anywhere."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    defs = getattr(item, "_fixtureinfo", None)
    shared = sorted(name for name, chain in (defs.name2fixturedefs.items() if defs else ())
                    if chain and chain[-1].scope == "module")
    return f"{item.module.__name__}:{shared[0]}" if shared else None


def record_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: write {node id: group} where the controller's scheduler reads it."""
    folder = getattr(config, "workerinput", {}).get(_GROUPS_KEY)
    if folder is None:
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    target = Path(folder) / f"{config.workerinput['workerid']}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(groups))
    os.replace(partial, target)  # the scheduler never reads half a file


def pytest_configure_node(node) -> None:
    """On the controller, before each worker starts: where the workers write their groups."""
    stash = node.config.stash
    if _GROUPS_DIR not in stash:
        stash[_GROUPS_DIR] = tempfile.mkdtemp(prefix="dsv4-xdist-groups-")
    node.workerinput[_GROUPS_KEY] = stash[_GROUPS_DIR]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FixtureGroupScheduling(LoadScopeScheduling):
        """A test's scope is its group (tests/xdist_groups.py), or the test alone."""

        _groups: dict[str, str] | None = None
        _longest_first = False

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # first called in schedule(), after every worker sent its collection
                folder = Path(config.stash[_GROUPS_DIR])
                written = sorted(folder.glob("*.json"))
                assert written, f"no worker wrote its test groups to {folder}"
                self._groups = json.loads(written[0].read_text())
            return self._groups.get(nodeid, nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._longest_first:  # the queue is complete by the first assignment
                self._longest_first = True
                known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
                units = sorted(self.workqueue.items(),
                               key=lambda unit: -sum(known.get(nodeid, UNKNOWN_DURATION_S) for nodeid in unit[1]))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return FixtureGroupScheduling(config, log)


def pytest_addoption(parser) -> None:
    parser.addoption("--update-durations", action="store_true",
                     help=f"write each test's duration to {DURATIONS.name}, which orders the work under xdist")


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report) -> None:
    """On the controller, the reports of every worker: setup, call and teardown add up."""
    _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session) -> None:
    if session.config.getoption("update_durations") and not hasattr(session.config, "workerinput"):
        partial = DURATIONS.with_suffix(".partial")
        partial.write_text(json.dumps({k: round(v, 2) for k, v in sorted(_measured.items())}, indent=0) + "\n")
        os.replace(partial, DURATIONS)


def pytest_unconfigure(config) -> None:
    if _GROUPS_DIR in config.stash:
        shutil.rmtree(config.stash[_GROUPS_DIR], ignore_errors=True)
