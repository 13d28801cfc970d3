"""Import the graph's libraries on a background thread while a campaign gets ready.

LangGraph pulls in langchain_core and langsmith: about half a second of imports before the graph
can run its first node. The campaign meanwhile loads its settings, asks nvidia-smi for the GPUs
and makes the run folder, mostly waiting on subprocesses and the disk; importing during those
waits lets the first GPU job start that much sooner (benchmarks/overlap.py measures it). Only
third-party modules are imported here, none of ours, so the two threads never import one
module cycle from opposite ends.
"""
from __future__ import annotations

import contextlib
import importlib
import threading

GRAPH_LIBRARIES = ("langgraph.graph", "langgraph.checkpoint.sqlite")


def preload_graph_libraries() -> None:
    threading.Thread(target=_import_all, name="preload-graph-libraries", daemon=True).start()


def _import_all() -> None:
    for name in GRAPH_LIBRARIES:
        with contextlib.suppress(Exception):  # a broken install is reported by the campaign's own import
            importlib.import_module(name)
