"""Attempts of one job: which ledger key to launch, to re-attach to, or to give up on.

A job is what it does (``JobSpec.identity``: the variant it serves, the point it measures, the
units it tunes); each *attempt* at it is one ledger entry, keyed ``<base>`` for the first and
``<base>-a<n>`` for the n-th. Ports, absolute paths and the attempt number are attributes of an
attempt, so a retry after a crash, on a new port, or from another directory is the same job.

Rules, applied to the chain ``base, base-a2, base-a3, ...`` as the ledger has it:

- an attempt still running (or only intended) is re-attached, never started beside;
- a succeeded attempt ends the chain: the job is done (finished work is never redone);
- failed, lost and timed-out attempts are retried, at most ``MAX_ATTEMPTS`` of them in a row;
- a stopped attempt (someone ran ``jobs --stop``) is retried only on request, unless the caller
  stops such jobs itself as routine (servers);
- an ended, unsuccessful attempt whose identity differs from the one asked now (the plan changed:
  other GPUs, another TP) is superseded and skipped; a running or succeeded one is refused, the
  message naming what differs and the option that resolves it;
- a request (``retry.json`` in the attempt's folder, written by ``jobs --retry JOB`` or
  ``resume --retry-failed``) makes the attempt's failure not count: a fresh budget follows it.

Every attempt keeps its own folder, log and exit record, so each one is on record.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

from tools import json_data
from tools.base import ToolError
from tools.jobs.executor import Executor
from tools.jobs.spec import JobState

MAX_ATTEMPTS = 3
RETRY_FILE = "retry.json"
FAILED = ("failed", "lost", "timed_out")
RETRYABLE = (*FAILED, "stopped")
Verdict = Literal["launch", "attach", "succeeded", "give_up"]


def attempt_key(base: str, number: int) -> str:
    return base if number == 1 else f"{base}-a{number}"


@dataclass
class Attempt:
    """What to do next for one job."""

    verdict: Verdict
    key: str                        # the attempt to launch or attach to (the last one on give_up)
    number: int                     # its attempt number, 1-based
    earlier: list[JobState] = field(default_factory=list)  # the attempts before it, in order
    reason: str = ""                # why give_up, or what the attempt retries

    @property
    def retry_of(self) -> JobState | None:
        return self.earlier[-1] if self.earlier else None


def _known(executor: Executor, key: str) -> JobState | None:
    try:
        return executor.poll(key)
    except ToolError:
        return None  # not in the ledger


def _identity(executor: Executor, key: str) -> object:
    try:
        return json_data.loads((executor.job_dir(key) / "job.json").read_text()).get("identity")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def retry_requested(executor: Executor, key: str) -> bool:
    return (executor.job_dir(key) / RETRY_FILE).exists()


def next_attempt(executor: Executor, base: str, identity: dict | None = None, *,
                 max_attempts: int = MAX_ATTEMPTS, retry_stopped: bool = False,
                 is_done: Callable[[JobState], bool] | None = None) -> Attempt:
    """The attempt to run now for the job ``base`` (see the module rules).

    ``is_done`` judges a succeeded attempt by its output (a bench client that exited 0 without
    writing its result line did not measure the point); one judged not done counts as failed.
    """
    earlier: list[JobState] = []
    failures = 0
    for number in range(1, 1000):
        key = attempt_key(base, number)
        state = _known(executor, key)
        if state is None:
            return _new(key, number, earlier, failures, max_attempts)
        recorded, wanted = _identity(executor, key), json.loads(json.dumps(identity))
        if identity is not None and recorded not in (None, wanted):
            if state.done and state.status != "succeeded":
                failures = 0  # an unfinished attempt at what the plan asked before (other GPUs): superseded
                continue
            raise ToolError(different_job(key, state, recorded, wanted))
        if not state.done:
            return Attempt("attach", key, number, earlier)
        if state.status == "succeeded" and (is_done is None or is_done(state)):
            return Attempt("succeeded", key, number, earlier)
        if state.status == "succeeded":
            state = state.model_copy(update={"status": "failed", "reason": "exited 0 but left no result"})
        granted = retry_requested(executor, key)
        if state.status == "stopped" and not (retry_stopped or granted):
            return Attempt("give_up", key, number, earlier, reason=(
                f"{key} was stopped on request; `dsv4-agent jobs RUN --retry {key}` or "
                "`dsv4-agent resume RUN --retry-failed` runs it again"))
        failures = 0 if granted else failures + (state.status in FAILED)
        earlier.append(state)
    raise ToolError(f"999 attempts of job {base!r} in this run; start a new run")


def different_job(key: str, state: JobState, recorded: dict, wanted: dict) -> str:
    """Why the ledger's job ``key`` cannot be taken for the one asked now, and the options that resolve it."""
    fields = sorted(k for k in {*recorded, *wanted} if recorded.get(k) != wanted.get(k))
    differs = "; ".join(f"{k}: {_shown(recorded.get(k))} then, {_shown(wanted.get(k))} now" for k in fields)
    what = "is running" if not state.done else "finished its work"
    fix = "start a new run for the new setup"
    if "gpus" in fields and isinstance(recorded.get("gpus"), list):
        fix = (f"resume with --gpus {','.join(map(str, recorded['gpus']))} to go on with the GPUs it used, or " + fix)
    if not state.done:
        fix = f"stop it with `dsv4-agent jobs RUN --stop {key}`, " + fix
    return f"job {key!r} of this run {what} as another job than the one asked for now ({differs}); {fix}"


def _shown(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) and all(isinstance(v, int) for v in value) else \
        json.dumps(value)


def _new(key: str, number: int, earlier: list[JobState], failures: int, max_attempts: int) -> Attempt:
    if failures >= max_attempts:
        last = earlier[-1]
        return Attempt("give_up", last.key, number - 1, earlier[:-1], reason=(
            f"{failures} attempts in a row failed (last: {last.key} {last.status}: {last.reason}); "
            f"`dsv4-agent resume RUN --retry-failed` or `dsv4-agent jobs RUN --retry {last.key}` tries again"))
    why = f"retries {earlier[-1].key} ({earlier[-1].status}: {earlier[-1].reason})" if earlier else ""
    return Attempt("launch", key, number, earlier, reason=why)


def request_retry(executor: Executor, key: str) -> JobState:
    """Record that the ended, unsuccessful job ``key`` may be tried again (``jobs --retry``)."""
    state = executor.poll(key)
    if not state.done:
        raise ToolError(f"job {key!r} is {state.status}; only an ended job can be retried")
    if state.status == "succeeded":
        raise ToolError(f"job {key!r} succeeded; finished work is not redone (start a new run to measure again)")
    path = executor.job_dir(key) / RETRY_FILE
    path.write_text(json.dumps({"requested_at": time.time(), "status": state.status}) + "\n")
    return state


def latest_attempts(executor: Executor) -> list[JobState]:
    """The last attempt of every job in the ledger (what ``resume --retry-failed`` looks at)."""
    states = {s.key: s for s in executor.jobs()}
    latest: list[JobState] = []
    for key, state in states.items():
        base, number = split_key(key)
        if attempt_key(base, number + 1) not in states:
            latest.append(state)
    return latest


def split_key(key: str) -> tuple[str, int]:
    """(base, attempt number) of an attempt key."""
    base, sep, tail = key.rpartition("-a")
    if sep and tail.isdigit() and int(tail) >= 2:
        return base, int(tail)
    return key, 1


def retry_failed(executor: Executor) -> list[str]:
    """Grant a retry to every job whose last attempt failed, was lost, timed out or was stopped."""
    granted = []
    for state in latest_attempts(executor):
        if state.status in RETRYABLE and not retry_requested(executor, state.key):
            request_retry(executor, state.key)
            granted.append(state.key)
    return granted
