"""LangGraph's ``SqliteSaver`` with a word before and after each checkpoint it saves (agent/campaign/checkpoints.py).

Imported only when a graph runs: LangGraph is a heavy import that ``status`` and ``--help`` never need.
"""
from __future__ import annotations

from typing import Callable

from langgraph.checkpoint.sqlite import SqliteSaver


class TracedSaver(SqliteSaver):
    """``before(metadata)`` may hold or stop the save (a replay past its record); ``after(config, metadata)``
    records it once it is on disk."""

    def __init__(self, conn, before: Callable[[dict], None], after: Callable[[dict, dict], None]):
        super().__init__(conn)
        self.before, self.after = before, after

    def put(self, config, checkpoint, metadata, new_versions):
        self.before(metadata)
        saved = super().put(config, checkpoint, metadata, new_versions)
        self.after(saved, metadata)
        return saved
