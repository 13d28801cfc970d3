"""How a campaign takes SIGINT, SIGTERM and SIGHUP: the first asks it to stop, a second means stop now.

SIGHUP (terminal closed, SSH dropped) is taken as SIGTERM: the jobs run on in their own sessions,
the run ends ``interrupted`` and ``resume`` goes on. The handlers never raise: an exception there
lands between two bytecodes of whatever the main thread does (a trace write, ``result.json``).
They record the signal and close the side-effect gate (tools/stop.py); the main thread, which only
waits for the graph's worker, raises ``Interrupted`` at that one safe point and exits 130.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable, TypeVar

from tools.stop import request_stop

T = TypeVar("T")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """SIGINT/SIGTERM/SIGHUP reached the agent (BaseException so no step can swallow it)."""


class SignalWatch:
    """Installs the handlers for the life of a ``with`` block and remembers what arrived."""

    def __init__(self) -> None:
        self.signals: list[str] = []
        self.first_at: float | None = None  # when the first signal was taken (wall time)
        self.arrived = threading.Event()
        self._wake = threading.Event()  # a signal, or the worker's end (wait_for returns at once)
        self.worker: threading.Thread | None = None  # the graph's thread, once waited for
        self._previous: dict[int, object] = {}
        self.raised: BaseException | None = None  # see fault()

    def __enter__(self) -> "SignalWatch":
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame) -> None:
        self.inject(signal.Signals(signum).name)

    def inject(self, name: str) -> None:
        """Take ``name`` as if that signal had arrived (a replay re-creates a recorded interrupt this way)."""
        request_stop()  # first: a side effect stamps its start before the gate, so any let through began before now
        if not self.signals:
            self.first_at = time.time()
        self.signals.append(name)
        self.arrived.set()
        self._wake.set()

    def fault(self, err: BaseException) -> None:
        """End the run with ``err`` raised at the safe point, as if the graph had raised it (a replay
        re-creates a recorded full disk this way)."""
        self.raised = err
        self._wake.set()

    @property
    def stop_now(self) -> bool:
        """A second signal came: wait for nothing more."""
        return len(self.signals) >= 2

    def worker_done(self) -> None:
        """The worker's last act: ``wait_for`` returns now, not at its next look."""
        self._wake.set()

    def wait_for(self, worker: threading.Thread) -> None:
        """Block until the worker ends; raise ``Interrupted`` as soon as a signal arrived."""
        self.worker = worker
        self._wake.clear()  # an earlier worker's end (a replay drives one watch per attempt) is not this one's
        while worker.is_alive() and not self.signals and self.raised is None:
            if self._wake.wait(0.2) and not self.signals and self.raised is None:
                worker.join(0.2)  # it said it is done: it ends in a moment
        if self.signals:
            raise Interrupted(self.signals[0])
        if self.raised is not None:
            raise self.raised

    def unless_stop_now(self, work: Callable[[], T], default: T, limit_s: float) -> T:
        """``work()``, unless it takes longer than ``limit_s`` or a second signal comes first."""
        box: list[T] = []
        thread = threading.Thread(target=lambda: box.append(work()), name="interrupt-wait", daemon=True)
        thread.start()
        waited = 0.0
        while thread.is_alive() and waited < limit_s and not self.stop_now:
            thread.join(0.05)
            waited += 0.05
        return box[0] if box else default


class LateLaneWrites(logging.Filter):
    """Drops the traceback concurrent.futures logs when a lane ends after the graph unwound (LangGraph's
    executor is closed): its writes belong to a superstep that never commits, so nothing is lost."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return not (isinstance(err, RuntimeError) and "cannot schedule new futures after shutdown" in str(err))


def _quiet_late_lane_writes() -> None:
    futures_log = logging.getLogger("concurrent.futures")
    if not any(isinstance(f, LateLaneWrites) for f in futures_log.filters):
        futures_log.addFilter(LateLaneWrites())


def invoke_responsively(graph, graph_input, config, watch: SignalWatch) -> dict:
    """Run the graph on a worker thread: a signal handler runs only while the main thread executes
    Python, and lanes block on jobs for as long as the jobs run."""
    box: dict = {}
    _quiet_late_lane_writes()

    def work() -> None:
        try:
            box["final"] = graph.invoke(graph_input, config, durability="sync")
        except BaseException as err:  # handed to the main thread, which applies the error policy
            box["error"] = err
        finally:
            watch.worker_done()

    worker = threading.Thread(target=work, name="campaign-graph", daemon=True)
    worker.start()
    watch.wait_for(worker)
    if "error" in box:
        raise box["error"]
    return box["final"]
