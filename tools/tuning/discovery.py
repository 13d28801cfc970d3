"""Discovery boot: start the baseline server once, let it load the model, stop it, keep its log.

The last source of shapes to tune. SGLang looks up a block-FP8 config the first time each GEMM
runs, and ``/health`` answers 503 until its warmup request has run every layer, so a ready server's
log holds one config line per shape on the Triton kernel (none when DeepGEMM serves them).

Idempotent across crashes: the job (key ``discovery``) re-attaches through the executor's ledger,
and once readiness was seen a state file records it and the log is reused. An attempt that ended
before it was ready is not reused: the next boots ``discovery-2``, ``discovery-3``, ...
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.jobs import Executor, JobSpec, JobState
from tools.scripts.models import EnvChoice, FlagChoice, ServeVariant
from tools.measure.server import ServerHandle, stop_server, wait_ready

DISCOVERY_KEY = "discovery"
DISCOVERY_KIND = "discovery"


class DiscoveryResult(BaseModel):
    key: str = Field(description="Job key of the attempt whose log is the evidence")
    log_path: str = Field(description="Server log to mine")
    reused: bool = Field(False, description="An earlier call already saw it ready; nothing was booted")
    attached: bool = Field(False, description="Re-attached to a server job started before a crash")
    ready_s: float | None = Field(None, description="Seconds from this call to readiness (None when reused)")


def _poll(executor: Executor, key: str) -> JobState | None:
    try:
        return executor.poll(key)
    except ToolError:
        return None  # no such job in the ledger


def _recorded_port(executor: Executor, key: str) -> int | None:
    try:
        argv = json.loads((executor.job_dir(key) / "job.json").read_text()).get("argv", [])
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return int(argv[argv.index("--port") + 1]) if "--port" in argv[:-1] else None


def _attempt_key(executor: Executor, base: str) -> str:
    """The first attempt that is not a server which already ended before it was ready."""
    number = 1
    while True:
        key = base if number == 1 else f"{base}-{number}"
        state = _poll(executor, key)
        if state is None or not state.done:
            return key
        number += 1


def _write_state(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def run_discovery(executor: Executor, variant: ServeVariant, python: str, state_file: Path,
                  ready_timeout_s: float = 1800.0, base_key: str = DISCOVERY_KEY,
                  emit: Callable[[str, dict], None] | None = None) -> DiscoveryResult:
    """Boot (or re-attach to) the discovery server, wait until ready, stop it, return its log.
    ``emit`` hears the job's launch and its finish (trace events), each once per job.

    Raises ``ToolError`` (with the log tail) when the server exits or times out before it is
    ready; on a timeout the server is stopped by ``wait_ready``.
    """
    emit = emit or (lambda _type, _data: None)
    state_file = Path(state_file)
    if state_file.exists():
        recorded = json.loads(state_file.read_text())
        running = _poll(executor, recorded["key"])
        if running is not None and not running.done:
            stop_server(executor, recorded["key"])  # the agent died between readiness and the stop
            emit("job_finished", {"key": recorded["key"], "kind": DISCOVERY_KIND, "status": "stopped",
                                  "log": recorded["log_path"]})
        return DiscoveryResult(key=recorded["key"], log_path=recorded["log_path"], reused=True)
    started = time.monotonic()
    key = _attempt_key(executor, base_key)
    port = _recorded_port(executor, key) or executor.free_port(variant.host)
    env = {k: v for k, v in variant.child_env().items() if k != "CUDA_VISIBLE_DEVICES"}
    spec = JobSpec(key=key, argv=[python, *variant.launch_args(port)], kind=DISCOVERY_KIND, lane="gpu",
                   env=env, gpus=variant.gpus, grace_s=15.0)
    state = executor.launch(spec)
    emit("job_launched", {"key": key, "kind": DISCOVERY_KIND, "attached": state.attached,
                          **({"gpus": variant.gpus} if variant.gpus is not None else {})})
    handle = ServerHandle(variant=variant.name, key=key, url=executor.reach(key, variant.host, port), port=port,
                          host=variant.host, log_path=state.log_path, attached=state.attached)
    try:
        wait_ready(executor, handle, ready_timeout_s, variant)
    except ToolError as err:
        emit("job_finished", {"key": key, "kind": DISCOVERY_KIND, "status": "failed", "log": state.log_path})
        raise ToolError(f"discovery boot (job {key}) failed: {err}\nFix what the log names and re-run (a fresh "
                        "attempt boots), or skip discovery by giving --shapes N,K or --model-path with config.json"
                        ) from None
    _write_state(state_file, {"key": key, "log_path": state.log_path, "url": handle.url, "ready_at": time.time()})
    stop_server(executor, key)
    emit("job_finished", {"key": key, "kind": DISCOVERY_KIND, "status": "stopped", "log": state.log_path})
    return DiscoveryResult(key=key, log_path=state.log_path, attached=state.attached,
                           ready_s=round(time.monotonic() - started, 3))


def flag_choices(words: list[str], source: str) -> list[FlagChoice]:
    """Server flags given as argv words (``--a 1 --b --c=2``) as the variant's flag choices."""
    choices: list[FlagChoice] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and "=" in word:
            flag, value = word.split("=", 1)
            i += 1
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            flag, value = word, words[i + 1]
            i += 2
        else:
            flag, value = word, ""
            i += 1
        try:
            choices.append(FlagChoice(flag=flag, value=value, source=source))
        except ValueError as err:  # pydantic's ValidationError is a ValueError
            raise ToolError(f"server flag {flag!r} from {source} is not usable: {err}; fix the flag list") from None
    return choices


def discovery_variant(model_path: str, tp: int, gpus: list[int], server_args: list[str],
                      env: dict[str, str]) -> ServeVariant:
    """The baseline server as the benchmark will start it, under the name ``discovery``."""
    try:
        return ServeVariant(name="discovery", model_path=model_path, tp=tp, gpus=gpus,
                            flags=flag_choices(server_args, "tune_kernels server_args"),
                            env=[EnvChoice(name=k, value=v, source="tune_kernels env") for k, v in env.items()],
                            rationale=["discovery boot: its log names the block-FP8 shapes the model runs"])
    except ValueError as err:
        raise ToolError(f"cannot describe the discovery server: {err}") from None
