"""A short outage of slurmctld is waited out by a poll (with a progress line per retry); past the
bound it is one error naming the controller and the fix; a real error is not retried.

Real one-node Slurm (tests/slurm_cluster.py): the controller is stopped and started again.
"""
from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import pytest

from tests.slowdown import limit, wait_for
from tools.base import ToolError
from tools.jobs.outages import OutageWait
from tools.jobs.slurm.executor import SlurmExecutor
from tools.jobs.slurm.query import run_slurm, show_job
from tools.jobs.spec import JobSpec

pytestmark = pytest.mark.xdist_group("slurm")  # one Slurm cluster for the session


def test_a_poll_waits_out_a_slurmctld_outage(slurm, tmp_path):
    said: list[str] = []
    retrying = threading.Event()
    outage = OutageWait(total_s=limit(120), notify=lambda line: (said.append(line), retrying.set()))
    ex = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env, outage=outage)
    go = tmp_path / "go"
    ex.launch(JobSpec(key="held", argv=["bash", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; echo done"]))
    wait_for(lambda: ex.poll("held").status == "running", 60, "the job to run")
    polled: list = []
    slurm.stop_slurmctld()
    try:
        poller = threading.Thread(target=lambda: polled.append(ex.poll("held")))
        poller.start()
        assert retrying.wait(limit(60)), "no retry was announced"
    finally:
        slurm.start_slurmctld()
    poller.join(limit(120))
    assert not poller.is_alive() and polled and polled[0].status == "running", polled
    assert said[0].startswith("slurmctld on ") and "does not answer `scontrol show job`; retry 1 in" in said[0], said
    assert said[-1].endswith("answered again after %d retries" % (len(said) - 1)), said
    go.touch()
    assert wait_for(lambda: (s := ex.poll("held")).done and s, 60, "the job to end").status == "succeeded"


def test_past_the_bound_one_error_names_the_controller_and_a_real_error_is_not_retried(slurm, tmp_path):
    said: list[str] = []
    conf = tmp_path / "slurm.conf"  # the cluster's, with a controller port nobody listens on
    lines = Path(slurm.env["SLURM_CONF"]).read_text().splitlines()
    conf.write_text("\n".join("SlurmctldPort=1" if line.startswith("SlurmctldPort=") else line for line in lines) + "\n")
    away = {**slurm.env, "SLURM_CONF": str(conf)}
    with pytest.raises(ToolError) as err:
        run_slurm(["scontrol", "show", "job", "-o", "1"], away, outage=OutageWait(total_s=1, notify=said.append))
    message = str(err.value)
    assert "\n" not in message and message.startswith("slurmctld on ") and "did not answer" in message, message
    assert "`dsv4-agent resume RUN`" in message and "scontrol ping" in message, message
    assert said and all("retry" in line for line in said), said
    quiet: list[str] = []
    assert show_job("999999", slurm.env, OutageWait(notify=quiet.append)) is None  # unknown job: an answer
    assert quiet == []


def test_a_controller_that_takes_the_connection_and_drops_it_is_no_answer(slurm, tmp_path):
    """A slurmctld restarting or failing over mid-request: the port accepts and closes at once."""
    said: list[str] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        stop = threading.Event()

        def drop_every_connection() -> None:
            listener.settimeout(0.2)
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    listener.accept()[0].close()

        dropper = threading.Thread(target=drop_every_connection, daemon=True)
        dropper.start()
        conf = tmp_path / "slurm.conf"
        lines = Path(slurm.env["SLURM_CONF"]).read_text().splitlines()
        port = listener.getsockname()[1]
        conf.write_text("\n".join(f"SlurmctldPort={port}" if line.startswith("SlurmctldPort=") else line
                                  for line in lines) + "\n")
        try:
            with pytest.raises(ToolError) as err:
                run_slurm(["scontrol", "show", "job", "-o", "1"], {**slurm.env, "SLURM_CONF": str(conf)},
                          outage=OutageWait(total_s=1, notify=said.append))
        finally:
            stop.set()
            dropper.join(limit(10))
    assert str(err.value).startswith("slurmctld on ") and "did not answer" in str(err.value), str(err.value)
    assert said and all("retry" in line for line in said), said
