"""A sweep's server for one variant: the one an earlier attempt left running (re-attached when it
passes the identity check, tools/measure/server_check.py), else a fresh one. A leftover that fails
the check is stopped and a fresh server started in its place, so a resumed sweep never measures
against, or stops at, a server that is not the variant's."""
from __future__ import annotations

from typing import Callable

from tools.base import ToolError
from tools.jobs import Executor
from tools.jobs.attempts import attempt_key, next_attempt
from tools.measure.identity import server_identity, server_job
from tools.measure.server import ServerHandle, ServerMisfit, launch_server
from tools.scripts.models import MeasurePlan, ServeVariant

EventSink = Callable[[str, dict], None]  # (trace event type, data)


def server_attempt(executor: Executor, variant: ServeVariant) -> tuple[str, bool]:
    """The server attempt to use and whether it re-attaches: the running one, else a new one (a fresh server)."""
    attempt = next_attempt(executor, server_job(variant.name), server_identity(variant), retry_stopped=True)
    if attempt.verdict == "give_up":
        raise ToolError(f"server for {variant.name!r}: {attempt.reason}")
    if attempt.verdict == "succeeded":  # a server that exited 0 on its own is over: start another
        return attempt_key(server_job(variant.name), attempt.number + 1), False
    return attempt.key, attempt.verdict == "attach"


def start_server(executor: Executor, plan: MeasurePlan, variant: ServeVariant, python: str, env: dict[str, str],
                  ready_timeout_s: float | None, emit: EventSink, keys: list[str]) -> ServerHandle:
    """The variant's server, ready: the one an earlier attempt left running when it passes the identity check,
    else (stopped) a fresh one. ``keys`` receives each launched key (the caller reports how each ended)."""
    for _ in range(2):
        key, attached = server_attempt(executor, variant)
        keys.append(key)
        emit("job_launched", {"key": key, "kind": "serve", "variant": variant.name,
                              **({"gpus": variant.gpus} if variant.gpus is not None else {})})
        try:
            return launch_server(executor, variant, python, key=key, extra_env=env,
                                 ready_timeout_s=ready_timeout_s or plan.ready_timeout_s)
        except ServerMisfit as err:
            if not attached:
                raise
            keys.pop()
            emit("job_finished", {"key": key, "kind": "serve", "status": "stopped"})
            emit("progress", {"message": f"{variant.name}: the server an earlier attempt left running failed the "
                                         f"identity check ({err}); starting a fresh one", "key": key})
    raise ToolError(f"server for {variant.name!r}: no fresh server could be started")  # the loop returns or raises
