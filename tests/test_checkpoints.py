"""What resume relies on from LangGraph's SqliteSaver (agent/campaign/checkpoints.py), on a real graph: a lane
that finished in a superstep that did not commit has its writes saved and would be skipped on
resume; after ``forget_pending_writes`` every lane of that superstep runs again."""
from __future__ import annotations

import operator
import sqlite3
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from agent.campaign.checkpoints import forget_pending_writes, open_checkpoints
from tests.slowdown import wait_for


class State(TypedDict):
    done: Annotated[list, operator.add]


def _wait_for_a_saved_write(db) -> None:
    """The killed lane dies only once the other lane's writes are on disk (as after a real kill).
    The input's own write to ``done`` (task ``__start__``) is there from the start, so the wait names
    the gpu lane's task."""
    query = "SELECT count(*) FROM writes WHERE channel = 'done' AND task_path LIKE '%, gpu'"
    with sqlite3.connect(db) as reader:
        wait_for(lambda: reader.execute(query).fetchone()[0], 30,
                 "the finished lane's writes in the database", interval=0.01)


def _graph(saver, calls: list[str], fail: dict, db):
    def lane(name: str):
        def run(state: State) -> dict:
            calls.append(name)
            if fail.get(name):
                _wait_for_a_saved_write(db)
                raise RuntimeError(f"{name} killed")
            return {"done": [name]}
        return run

    g = StateGraph(State)
    g.add_node("gpu", lane("gpu"))
    g.add_node("research", lane("research"))
    g.add_edge(START, "gpu")
    g.add_edge(START, "research")
    g.add_edge("gpu", END)
    g.add_edge("research", END)
    return g.compile(checkpointer=saver)


def _interrupted_run(tmp_path):
    db = tmp_path / "checkpoint.sqlite"
    conn, saver = open_checkpoints(db)
    calls: list[str] = []
    fail = {"research": True}
    graph = _graph(saver, calls, fail, db)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError, match="research killed"):
        graph.invoke({"done": []}, config)
    fail["research"] = False
    state = graph.get_state(config)
    assert state.next == ("research",)  # the superstep did not commit; gpu's writes are saved
    return conn, saver, graph, config, calls, state


def test_the_finished_lanes_writes_are_pending_in_the_writes_table(tmp_path):
    conn, saver, graph, config, calls, state = _interrupted_run(tmp_path)
    pending = saver.get_tuple(state.config).pending_writes
    assert any(task_write[1] == "done" and task_write[2] == ["gpu"] for task_write in pending)
    ids = state.config["configurable"]
    rows = conn.execute("SELECT count(*) FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                        (ids["thread_id"], ids.get("checkpoint_ns", ""), ids["checkpoint_id"])).fetchone()[0]
    assert rows >= 1
    calls.clear()
    graph.invoke(None, config)
    assert calls == ["research"]  # without forgetting, LangGraph reuses the saved lane: what resume must avoid
    conn.close()


def test_after_forgetting_every_lane_of_the_superstep_runs_again(tmp_path):
    conn, saver, graph, config, calls, state = _interrupted_run(tmp_path)
    forget_pending_writes(conn, state.config)
    assert not any(w[1] == "done" for w in saver.get_tuple(state.config).pending_writes)
    assert set(graph.get_state(config).next) == {"gpu", "research"}
    calls.clear()
    final = graph.invoke(None, config)
    assert sorted(calls) == ["gpu", "research"]
    assert sorted(final["done"]) == ["gpu", "research"]
    conn.close()
