"""A waiting lane wakes soon after a job's exit record appears (tools/jobs/exit_wait.py), also when the
job ends between its poll and the lane's sleep; an earlier run's record (Slurm requeued the job) wakes it
only once it is replaced. Real files in a LocalExecutor's ledger, the sleep on a thread of its own."""
from __future__ import annotations

import os
import threading

from tests.slowdown import limit
from tools.jobs import LocalExecutor
from tools.jobs import exit_wait

HOUR = 3600.0  # a sleep that ends only by waking: a missed exit would hold the lane this long


def _sleeping(executor: LocalExecutor, seen: dict) -> threading.Event:
    woke = threading.Event()

    def sleep() -> None:
        exit_wait.sleep_until_an_exit(executor, seen, HOUR)
        woke.set()

    threading.Thread(target=sleep, daemon=True).start()
    return woke


def test_an_exit_written_between_the_poll_and_the_sleep_wakes_the_lane(tmp_path):
    executor = LocalExecutor(tmp_path / "jobs")
    folder = executor.job_dir("tune-gpu0")
    folder.mkdir(parents=True)
    seen = {"tune-gpu0": exit_wait.exit_stamp(executor, "tune-gpu0")}  # taken before the poll: no record yet
    (folder / "exit.json").write_text("{}")  # the job ends before the lane goes to sleep
    assert _sleeping(executor, seen).wait(limit(60))


def test_an_earlier_runs_exit_record_wakes_the_lane_only_once_replaced(tmp_path):
    executor = LocalExecutor(tmp_path / "jobs")
    folder = executor.job_dir("tune-gpu1")
    folder.mkdir(parents=True)
    (folder / "exit.json").write_text('{"run": 1}')
    seen = {"tune-gpu1": exit_wait.exit_stamp(executor, "tune-gpu1")}
    woke = _sleeping(executor, seen)
    assert not woke.wait(limit(0.5))  # still asleep: the record it saw is an old one (the sleep would last an hour)
    (folder / "exit.new").write_text('{"run": 2}')
    os.replace(folder / "exit.new", folder / "exit.json")  # how a ledger writes a record: a new file renamed in
    assert woke.wait(limit(60))
