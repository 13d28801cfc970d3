"""SGLang server lifecycle through the job manager: launch, wait until *our* server is ready, stop.

Ready means: ``/health`` (or ``/v1/models``) answers 200, a process of the job's own group holds
the listening socket, and ``/server_info`` reports the model and speculative settings we launched
(tools/measure/server_check.py). A server someone else started on the port while ours loaded is
never measured. On a timeout or an early exit the message carries the log tail and the server is
stopped; only the job's own process group is ever signalled.

Over SSH the port is picked free on that host and ``url`` is the agent's ``ssh -L`` forward, while
``host``/``port`` are what jobs there use. Under Slurm the node is known only once the job starts:
the server listens on all its interfaces on a port it picks (recorded by tools/jobs/slurm/serve.py),
so this machine must reach the compute nodes' ports.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Callable, Collection, cast

from pydantic import BaseModel, Field

from tools.base import ToolError, cap_text
from tools.jobs import Executor, JobSpec, JobState
from tools.jobs.executor import NodeServing, base_url, free_local_port
from tools.measure.server_check import expected_identity, fetch_info, identity_problem, port_taken
from tools.jobs.attempts import next_attempt
from tools.measure.identity import server_identity, server_job
from tools.scripts.models import ServeVariant

READY_PATHS = ("/health", "/v1/models")
CLUSTER_BIND = "0.0.0.0"  # a Slurm server job: reachable from the login node and the other nodes
CLUSTER_PORT = "DSV4_PORT"  # filled in on the node by tools/jobs/slurm/serve.py
LOG_TAIL_CHARS = 3000
free_port = free_local_port  # a port free on this machine (for callers that start servers here)


def probe_ready(url: str, timeout_s: float = 2.0) -> bool:
    """True when the server answers 200 on one of the readiness paths."""
    for path in READY_PATHS:
        try:
            with urllib.request.urlopen(url + path, timeout=timeout_s) as response:
                if response.status == 200:
                    return True
        except urllib.error.HTTPError as err:
            if err.code == 404:
                continue  # no such route on this build: try the next path
            return False  # 503 while loading
        except (urllib.error.URLError, OSError):
            return False
    return False


class ServerHandle(BaseModel):
    variant: str
    key: str = Field(description="Job key of the server")
    url: str = Field(description="Where the agent reaches it (probes, snapshots): maybe a port forward")
    host: str = Field("127.0.0.1", description="Address jobs on the server's host connect to")
    port: int = Field(description="Port the server listens on, on its host")
    log_path: str
    attached: bool = Field(False, description="True when an already running server was re-attached")


class ServerMisfit(ToolError):
    """Our own server process answers with settings other than the variant's (the identity check failed)."""


def _log_tail(executor: Executor, key: str) -> str:
    capped = cap_text(executor.read_log(key, max_chars=LOG_TAIL_CHARS * 2), LOG_TAIL_CHARS)
    return (capped.note + "\n" if capped.truncated else "") + capped.text


def launch_server(executor: Executor, variant: ServeVariant, python: str, port: int | None = None,
                  key: str | None = None, ready_timeout_s: float = 1800.0,
                  extra_env: dict[str, str] | None = None) -> ServerHandle:
    """Start (or re-attach to) the variant's server and block until it is ready."""
    key = key or f"serve-{variant.name}"
    if executor.capabilities.servers_on_nodes:
        return _launch_on_cluster(executor, variant, python, key, ready_timeout_s, extra_env)
    recorded = _recorded_port(executor, key)
    if recorded is not None:
        port = recorded  # a re-run after a crash: the same argv re-attaches to the same job
    elif port is None:
        port = executor.free_port(variant.host)
    elif not executor.capabilities.remote_host and port_taken(variant.host, port):
        raise ToolError(f"port {port} on {variant.host} is already in use by another process; "
                        "stop it, pick another port, or leave the port unset to use a free one")
    env = {k: v for k, v in variant.child_env().items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(extra_env or {})
    spec = JobSpec(key=key, argv=[python, *variant.launch_args(port)], kind="serve", lane="gpu",
                   env=env, gpus=variant.gpus, grace_s=15.0, identity=server_identity(variant))
    state = executor.launch(spec)
    try:
        url = executor.reach(key, variant.host, port)
    except ToolError:
        stop_server(executor, key)
        raise
    handle = ServerHandle(variant=variant.name, key=key, url=url, host=variant.host, port=port,
                          log_path=state.log_path, attached=state.attached)
    wait_ready(executor, handle, ready_timeout_s, variant)
    return handle


def _launch_on_cluster(executor: Executor, variant: ServeVariant, python: str, key: str, ready_timeout_s: float,
                       extra_env: dict[str, str] | None) -> ServerHandle:
    """A Slurm server job: submit (or re-attach by key), wait for its node and port, then for readiness."""
    nodes = cast(NodeServing, executor)
    _recorded_port(executor, key)  # a server job of this key that already ended is an error
    env = {k: v for k, v in variant.child_env().items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(extra_env or {})
    bind = variant.model_copy(update={"host": CLUSTER_BIND})
    argv = nodes.serve_argv(key, [python, *bind.launch_args(CLUSTER_PORT)])
    gpus = variant.gpus if variant.gpus is not None else list(range(variant.tp))  # Slurm reads the count only
    state = executor.launch(JobSpec(key=key, argv=argv, kind="serve", lane="gpu", env=env, gpus=gpus, grace_s=15.0,
                                    identity=server_identity(variant)))
    deadline = time.monotonic() + ready_timeout_s
    while (endpoint := nodes.server_endpoint(key)) is None:
        polled = executor.poll(key)
        if polled.done:
            raise ToolError(f"server {variant.name!r} exited before it was ready ({polled.status}: {polled.reason}); "
                            f"fix the flags or environment it names. Log tail ({state.log_path}):\n"
                            f"{_log_tail(executor, key)}")
        if time.monotonic() >= deadline:
            stop_server(executor, key)
            raise ToolError(f"server {variant.name!r} got no node and port within {ready_timeout_s:g} s "
                            f"({polled.reason or polled.status}); it was cancelled. Raise the readiness timeout "
                            "or pick a partition with free GPUs (--executor slurm:PARTITION)")
        time.sleep(0.5)
    node, port = endpoint
    handle = ServerHandle(variant=variant.name, key=key, url=base_url(node, port), host=node, port=port,
                          log_path=state.log_path, attached=state.attached)
    wait_ready(executor, handle, max(deadline - time.monotonic(), 1.0), variant)
    return handle


def _recorded_port(executor: Executor, key: str) -> int | None:
    """The port of a server job already in the ledger and still running, else None."""
    try:
        state = executor.poll(key)
    except ToolError:
        return None
    if state.done:
        raise ToolError(f"server job {key!r} already ended ({state.status}: {state.reason}); "
                        "use a new job key for a fresh server")
    argv = _job_argv(executor, key)
    value = argv[argv.index("--port") + 1] if "--port" in argv[:-1] else ""
    return int(value) if value.isdigit() else None  # DSV4_PORT: a Slurm job's port is picked on its node


def _job_argv(executor: Executor, key: str) -> list[str]:
    try:
        return json.loads((executor.job_dir(key) / "job.json").read_text()).get("argv", [])
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def _who_answers(executor: Executor, handle: ServerHandle, variant: ServeVariant | None) -> tuple[str, str]:
    """("none", "") nothing ready answers yet; ("ours", "") our server is ready; ("foreign", why)
    another process holds the port; ("misfit", why) our own process answers with other settings."""
    if not probe_ready(handle.url):
        return "none", ""
    if not executor.job_listens(handle.key, handle.port):
        return "foreign", (f"port {handle.port} on {handle.host} answers, but no process of server job "
                           f"{handle.key!r} listens on it: another process holds that port")
    if variant is None:
        return "ours", ""
    info = fetch_info(handle.url)
    if info is None:
        return "misfit", f"the server on port {handle.port} answers /health but neither /server_info nor /get_server_info"
    flags = {choice.flag: choice.value for choice in variant.flags}
    problem = identity_problem(info, expected_identity(variant.model_path, flags))
    return ("misfit", f"the server on port {handle.port} is not the one we launched: {problem}") if problem else ("ours", "")


def wait_ready(executor: Executor, handle: ServerHandle, timeout_s: float, variant: ServeVariant | None = None,
               poll_s: float = 0.5) -> None:
    """Block until our server is ready (see the module docstring); on early exit or timeout stop it
    and raise with the log tail and, when something else answers on its port, what that is."""
    deadline = time.monotonic() + timeout_s
    foreign = ""
    while True:
        state = executor.poll(handle.key)
        if state.done:
            kind, why = _who_answers(executor, handle, variant)
            foreign = why if kind == "foreign" else foreign
            raise ToolError(f"server {handle.variant!r} exited before it was ready ({state.status}: "
                            f"{state.reason}){'; ' + foreign if foreign else ''}; nothing was measured. Log tail "
                            f"({handle.log_path}):\n{_log_tail(executor, handle.key)}")
        kind, why = _who_answers(executor, handle, variant)
        if kind == "ours":
            return
        if kind == "misfit":
            stop_server(executor, handle.key)
            raise ServerMisfit(f"server {handle.variant!r}: {why}; it was stopped and nothing was measured")
        foreign = why if kind == "foreign" else foreign
        if time.monotonic() >= deadline:
            stop_server(executor, handle.key)
            raise ToolError(f"server {handle.variant!r} not ready at {handle.url} after {timeout_s:g} s"
                            f"{' (' + foreign + ')' if foreign else ''}; it was stopped. Raise the readiness timeout "
                            f"if the model loads slowly. Log tail ({handle.log_path}):\n{_log_tail(executor, handle.key)}")
        time.sleep(poll_s)


def stop_server(executor: Executor, key: str, grace_s: float | None = None) -> JobState:
    """Stop the server job's process group (the executor only signals groups it started)."""
    return executor.stop(key, grace_s=grace_s)


def running_server(executor: Executor, variant: ServeVariant) -> str | None:
    """The key of the variant's server attempt that still runs (to re-attach to), else None."""
    try:
        attempt = next_attempt(executor, server_job(variant.name), server_identity(variant), retry_stopped=True)
    except ToolError:
        return None  # it runs as another job (other GPUs, another TP): a leftover, for stop_servers
    return attempt.key if attempt.verdict == "attach" else None


SERVER_KINDS = ("serve", "discovery")  # the job kinds that are servers (tools/tuning/discovery.py boots one)


def stop_servers(executor: Executor, keep: Collection[str | None] = ()) -> tuple[list[JobState], list[str]]:
    """Stop every server job of the run that may still run, but those in ``keep``: (the states of those it
    stopped, why each one it could not stop was not). A server is needed only while its variant is
    measured, so any other one is a leftover (an agent killed before it stopped it) on GPUs that the
    next server needs. A job whose wrapper died without a word ("lost") is looked at too: its group
    may live on."""
    stopped, refused = [], []
    for state in executor.jobs():
        if state.kind not in SERVER_KINDS or state.key in keep or (state.done and state.status != "lost"):
            continue
        try:
            after = executor.stop(state.key)
        except ToolError as err:
            refused.append(str(err))
            continue
        if not state.done:
            stopped.append(after)
    return stopped, refused


def stop_leftover_servers(executor: Executor, keep: Collection[str | None],
                          emit: Callable[[str, dict], None]) -> list[str]:
    """``stop_servers`` for a sweep, told through ``emit`` (trace event type, data): why each server
    it could not stop was not."""
    stopped, refused = stop_servers(executor, keep)
    for state in stopped:
        emit("progress", {"message": f"stopped server job {state.key}, left running by an earlier attempt "
                                     "and not needed now", "key": state.key})
        emit("job_finished", {"key": state.key, "kind": state.kind, "status": state.status})
    for why in refused:
        emit("error", {"error": "server_not_stopped", "message": why})
    return refused
