"""The graph's checkpoints in ``runs/<id>/checkpoint.sqlite`` (LangGraph's ``SqliteSaver``), the
one thing done to them that LangGraph has no public call for (tests/test_checkpoints.py pins it),
and whether they are whole.

A checkpoint cut short (a full disk, a copy interrupted) or overwritten makes SQLite answer "database
disk image is malformed" to every read. ``resume`` checks it first and refuses with the fix;
``resume --rebuild-checkpoint`` keeps the damaged file as ``checkpoint.damaged-N.sqlite`` and starts
the graph afresh: every step whose outcome is on file (``steps/<kind>.json``) is reused and every job
in the ledger is re-attached by key, so nothing finished is redone and nothing running is started
twice. The attempt's ``run_resumed`` says so (``rebuilt_checkpoint``), and a replay does the same.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from agent.runfolder import RunFolder


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


class CheckpointError(Exception):
    """The checkpoint cannot carry a resume as asked; the message names the fix."""


def checkpoint_to_rebuild(run: RunFolder, events: list[dict], rebuild: bool) -> str | None:
    """What is wrong with the run's checkpoint (None: nothing); CheckpointError naming the fix unless
    ``rebuild`` was asked for, or when it was asked for a whole checkpoint."""
    problem = checkpoint_problem(run.checkpoint_path, events)
    if problem and not rebuild:
        raise CheckpointError(f"cannot resume {run.path.name}: its checkpoint {run.checkpoint_path} {problem}; "
                              f"`dsv4-agent resume {run.path} --rebuild-checkpoint` sets it aside and re-derives the "
                              "run's progress from its trace, step outcomes and job ledgers")
    if rebuild and not problem:
        raise CheckpointError(f"the checkpoint {run.checkpoint_path} is whole: nothing to rebuild; "
                              f"`dsv4-agent resume {run.path}` continues the run")
    return problem


def checkpoint_problem(path: Path, events: list[dict]) -> str | None:
    """Why the checkpoint cannot carry the run on, or None. Missing or empty is a problem only once the
    trace shows a superstep committed (a node after preflight started: LangGraph saves a superstep's
    writes before the next one begins); before that a resume starts the graph afresh anyway."""
    committed = any(e["type"] == "node_started" and e.get("node") != "preflight" for e in events)
    if not path.exists() or path.stat().st_size == 0:
        return ("is missing" if not path.exists() else "is empty") if committed else None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                return f"is damaged ({verdict})"
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if committed and ("checkpoints" not in tables
                              or db.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is None):
                return "holds no checkpoint of the run"
    except sqlite3.DatabaseError as err:
        return f"is damaged ({err})"
    return None


def set_checkpoint_aside(run: RunFolder) -> None:
    """Keep a damaged checkpoint (and its journal files) for inspection as ``checkpoint.damaged-N.sqlite``;
    the graph starts a new one."""
    number = 1 + len(list(run.path.glob("checkpoint.damaged-*.sqlite")))
    for suffix in ("", "-wal", "-shm"):
        source = run.path / f"checkpoint.sqlite{suffix}"
        if source.exists():
            os.replace(source, run.path / f"checkpoint.damaged-{number}.sqlite{suffix}")
