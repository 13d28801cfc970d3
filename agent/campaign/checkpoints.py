"""The graph's checkpoints in ``runs/<id>/checkpoint.sqlite`` (LangGraph's ``SqliteSaver``), the
one thing done to them that LangGraph has no public call for (tests/test_checkpoints.py pins it),
and whether they are whole.

A write-ahead log (``checkpoint.sqlite-wal``) cut short after a kill leaves a database SQLite reads
without complaint, but older: the checkpoints saved after the cut are gone. The trace records every
save, so a checkpoint it records that the file lacks is named as damage too, never resumed past.

A checkpoint cut short or overwritten makes SQLite call every read "malformed": ``resume`` checks
first and refuses with the fix. ``resume --rebuild-checkpoint`` keeps the damaged file aside and
starts the graph afresh, reusing every step outcome on file and re-attaching every job by key, so
nothing finished is redone and nothing running starts twice (``run_resumed``: ``rebuilt_checkpoint``).
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from agent.run.folder import RunFolder

if TYPE_CHECKING:
    from agent.campaign.runtime import Runtime


def open_checkpoints(path: Path | str, before_save=None, after_save=None):
    """A connection and the saver on it; the caller closes the connection when the graph is done. With
    ``before_save``/``after_save`` each save is announced (agent/campaign/traced_saver.py)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    if before_save is None and after_save is None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        return conn, SqliteSaver(conn)
    from agent.campaign.traced_saver import TracedSaver

    return conn, TracedSaver(conn, before_save or (lambda _meta: None), after_save or (lambda _c, _m: None))


def traced_checkpoints(events: list[dict], thread: str) -> set[str] | None:
    """Ids of the checkpoints the trace records as saved in ``thread``; None when the attempt that opened the
    thread recorded none (a run from before checkpoints were traced: nothing is dropped then)."""
    opened, saved = None, set()
    current = None
    for event in events:
        if event["type"] in ("run_started", "run_resumed"):
            current = "attempt-1" if event["type"] == "run_started" else event.get("thread")
            if current == thread and opened is None:
                opened = bool(event.get("checkpoints_traced"))
        elif event["type"] == "checkpoint_saved" and current == thread:
            saved.add(event["checkpoint_id"])
    return saved if opened else None


def checkpoint_words(rt: "Runtime") -> tuple:
    """What the saver says around each save: the trace's gates first (a replay holds a lane there when its
    record has no such save), then ``checkpoint_saved`` once it is on disk (see agent/campaign/checkpoints.py)."""
    if not rt.trace_checkpoints:
        return None, None

    def before(metadata: dict) -> None:
        for gate in rt.trace.gates:
            gate({"lane": "control", "type": "checkpoint_saved", "step": metadata.get("step")})

    def after(config: dict, metadata: dict) -> None:
        rt.trace.emit("checkpoint_saved", "control", step=metadata.get("step"),
                      checkpoint_id=config["configurable"]["checkpoint_id"])

    return before, after


def follow_the_trace(conn: sqlite3.Connection, trace_path: Path, thread: str) -> list[str]:
    """Before resuming ``thread``: drop what the trace does not record of it (see ``forget_untraced``)."""
    from agent.run.trace import read_trace

    traced = traced_checkpoints(read_trace(trace_path).events, thread)
    return [] if traced is None else forget_untraced(conn, thread, traced)


def forget_untraced(conn: sqlite3.Connection, thread: str, traced: set[str]) -> list[str]:
    """Drop the thread's checkpoints the trace does not record: a kill landed after SQLite saved one and
    before its ``checkpoint_saved`` was written. The trace alone then says where the run stands, so a
    resume and its replay go on from the same checkpoint. Returns the ids dropped."""
    try:
        rows = conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?", (thread,)).fetchall()
    except sqlite3.OperationalError:  # no table yet: nothing was saved
        return []
    dropped = [cid for (cid,) in rows if cid not in traced]
    for cid in dropped:
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (thread, cid))
        conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?", (thread, cid))
    conn.commit()
    return dropped


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


def close_when_ended(worker: threading.Thread | None, conn: sqlite3.Connection) -> None:
    """Close the checkpoint database once the graph's thread is done with it: after an interrupt without a
    hard exit (a replay) it may still be writing its last checkpoint, and sqlite would crash under it."""
    if worker is None or not worker.is_alive():
        conn.close()
    else:
        threading.Thread(target=lambda: (worker.join(), conn.close()), name="checkpoint-close", daemon=True).start()


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
    """Why the checkpoint cannot carry the run on, or None. A checkpoint is owed once the trace records a
    save, or a superstep committed (a node after preflight started: LangGraph saves a superstep's writes
    before the next one begins); before either, a resume starts the graph afresh anyway. The GPU lane
    is no sign: it may start before the graph (agent/campaign/early_lane.py), and in the graph it starts after sync.
    A kill between the first saves and the next node leaves them in the write-ahead log alone (the main
    file may still be empty): a log cut there loses every save, and that is named like any other loss."""
    committed = any(e["type"] == "node_started" and e.get("node") not in ("preflight", "gpu_lane") for e in events)
    _, must_hold = thread_to_continue(events)
    owed = committed or bool(must_hold)
    if not path.exists() or path.stat().st_size == 0:
        if not owed:
            return None
        return _none_left(path, must_hold) if path.exists() else "is missing"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                return f"is damaged ({verdict})"
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if owed and ("checkpoints" not in tables
                         or db.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is None):
                return _none_left(path, must_hold)
            return _lost_saves(db, events) if "checkpoints" in tables else None
    except sqlite3.DatabaseError as err:
        return f"is damaged ({err})"
    return None


def _none_left(path: Path, must_hold: list[str]) -> str:
    """No checkpoint at all: where the trace records saves and a write-ahead log lies beside the file, the
    log was cut before its first whole save (a kill early in the run), and that is what is named."""
    if must_hold and path.with_name(path.name + "-wal").exists():
        return (f"holds none of the {len(must_hold)} checkpoints the trace records as saved: its write-ahead log "
                "(checkpoint.sqlite-wal) was cut short by a crash, and resuming from what is left would silently "
                "step the run back")
    return "is empty" if path.stat().st_size == 0 else "holds no checkpoint of the run"


def _lost_saves(db: sqlite3.Connection, events: list[dict]) -> str | None:
    """A checkpoint the trace records as saved in the thread a resume would continue, missing from the
    file: SQLite dropped what followed a torn write-ahead log (``checkpoint.sqlite-wal`` cut short by a
    crash) and would carry the run on from an older checkpoint, silently. None when all are there."""
    thread, must_hold = thread_to_continue(events)
    if not must_hold:
        return None
    held = {cid for (cid,) in db.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?", (thread,))}
    lost = [cid for cid in must_hold if cid not in held]
    if not lost:
        return None
    return (f"lacks {len(lost)} of the {len(must_hold)} checkpoints the trace records as saved (the latest, "
            f"{lost[-1]}, among them): its write-ahead log (checkpoint.sqlite-wal) was cut short by a crash, and "
            "resuming from what is left would silently step the run back")


def thread_to_continue(events: list[dict]) -> tuple[str | None, list[str]]:
    """The thread a resume of a killed run continues (the last attempt's) and the checkpoints the trace
    records as saved in it since it last started afresh (a new attempt, a rebuilt checkpoint, other
    GPUs: the thread's earlier checkpoints were set aside or deleted then), in the order saved."""
    thread, saved = None, []
    for event in events:
        kind = event["type"]
        if kind == "run_started":
            thread, saved = "attempt-1", []
        elif kind == "run_resumed":
            if event.get("thread") != thread or event.get("rebuilt_checkpoint") or event.get("gpus_changed"):
                saved = []
            thread = event.get("thread")
        elif kind == "checkpoint_saved" and thread is not None:
            saved.append(event["checkpoint_id"])
    return thread, saved


def set_checkpoint_aside(run: RunFolder) -> None:
    """Keep a damaged checkpoint (and its journal files) for inspection as ``checkpoint.damaged-N.sqlite``;
    the graph starts a new one."""
    number = 1 + len(list(run.path.glob("checkpoint.damaged-*.sqlite")))
    for suffix in ("", "-wal", "-shm"):
        source = run.path / f"checkpoint.sqlite{suffix}"
        if source.exists():
            os.replace(source, run.path / f"checkpoint.damaged-{number}.sqlite{suffix}")
