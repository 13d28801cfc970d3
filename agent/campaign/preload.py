"""Load, on background threads, what a campaign will need a moment later.

LangGraph's imports would otherwise come before the graph's first node; the campaign meanwhile
mostly waits on subprocesses, so importing then brings the first GPU job sooner. Only third-party
modules are imported there (two threads never import one cycle from opposite ends).
"""
from __future__ import annotations

import contextlib
import importlib
import threading
from typing import Callable

GRAPH_LIBRARIES = ("langgraph.graph", "langgraph.checkpoint.sqlite")


_GRAPH_PRELOAD: list[threading.Thread] = []
_BACKGROUND: list[threading.Thread] = []


def preload_graph_libraries() -> None:
    thread = threading.Thread(target=_import_all, name="preload-graph-libraries", daemon=True)
    _GRAPH_PRELOAD.append(thread)
    thread.start()


def still_loading() -> bool:
    """Whether a background import still runs: an early exit must not tear the interpreter down under it."""
    return any(thread.is_alive() for thread in (*_GRAPH_PRELOAD, *_BACKGROUND))


def in_background(work: Callable[[], None]) -> None:
    """Run ``work`` beside the lanes, not inside one; ``wait_for_background`` joins it."""
    def quietly() -> None:
        with contextlib.suppress(Exception):  # what fails here fails again, reported, where it is used
            work()

    thread = threading.Thread(target=quietly, name=f"preload-{work.__name__}", daemon=True)
    _BACKGROUND.append(thread)
    thread.start()


def wait_for_background(timeout_s: float = 60.0) -> None:
    while _BACKGROUND:
        _BACKGROUND.pop().join(timeout_s)


def _import_all() -> None:
    for name in GRAPH_LIBRARIES:
        with contextlib.suppress(Exception):  # a broken install is reported by the campaign's own import
            importlib.import_module(name)


def import_what_follows_the_gpu_jobs() -> None:
    """The measure step and the report (matplotlib) are imported while the GPU jobs run, so the time
    between the tuning and the first server, and after the last server, is work."""
    from agent.report.drawer import warm_drawer

    warm_drawer()  # the report's plots are drawn there (agent/report/drawer.py)
    import agent.report.build  # noqa: F401  plots, measurement tables, accuracy
    import agent.steps.benchmark  # noqa: F401
    from agent.report.timeline_view import warm_up

    warm_up()
