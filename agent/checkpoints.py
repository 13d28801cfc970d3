"""The graph's checkpoints in ``runs/<id>/checkpoint.sqlite`` (LangGraph's ``SqliteSaver``), and the
one thing done to them that LangGraph has no public call for (tests/test_checkpoints.py pins it)."""
from __future__ import annotations

import sqlite3
from pathlib import Path


def open_checkpoints(path: Path | str):
    """A connection and the saver on it; the caller closes the connection when the graph is done."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    return conn, SqliteSaver(conn)


def forget_pending_writes(conn: sqlite3.Connection, checkpoint: dict) -> None:
    """Drop the writes that nodes of the superstep after ``checkpoint`` saved before it committed, so
    resuming runs all of that superstep's nodes again. ``SqliteSaver`` keeps them in its ``writes``
    table keyed by thread, namespace and checkpoint id, and offers only ``delete_thread``."""
    ids = checkpoint["configurable"]
    conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                 (ids["thread_id"], ids.get("checkpoint_ns", ""), ids["checkpoint_id"]))
    conn.commit()
