"""Install / uninstall tuned configs on the GPU host, as jobs through the executor.

Over SSH the server reads configs from *that* host's SGLang, so installing here would change the
wrong folder. The standalone ``host_install.py`` (``host_rules.py`` inlined) is written into the run
folder as ``tuning/install_configs.py`` and run there as a job; the merged files travel in its argv
and its manifest comes back, marked ``installed_by`` the executor so uninstall runs on that host.

Idempotent: the install job's identity is the merged files' contents, so a re-run re-attaches to it
and a lost one gets a new attempt that finishes the interrupted install; each uninstall gets a fresh
key (the script does nothing when the install is already undone).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from tools.base import ToolError, cap_text
from tools.jobs import Executor, JobSpec, JobState
from tools.jobs.attempts import next_attempt
from tools.stop import side_effect
from tools.tuning.install import MANIFEST, Manifest, UninstallResult, load_manifest

HOST_SCRIPT = "tuning/install_configs.py"
RULES_BEGIN, RULES_END = "# host_rules: begin", "# host_rules: end\n"


def host_script_source() -> str:
    """``host_install.py`` with ``host_rules.py`` in place of its import of it: one stdlib-only file,
    reviewable in the run folder and runnable on the host with nothing else there."""
    here = Path(__file__).parent
    body = (here / "host_install.py").read_text()
    start, end = body.index(RULES_BEGIN), body.index(RULES_END) + len(RULES_END)
    return body[:start] + (here / "host_rules.py").read_text() + body[end:]


SCRIPT_SOURCE = host_script_source()
JOB_TIMEOUT_S = 600.0


def executor_label(executor: Executor) -> str:
    """What the manifest records as ``installed_by`` (the --executor value that reaches the host)."""
    return executor.label


def write_host_script(run_dir: Path) -> Path:
    path = Path(run_dir) / HOST_SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != SCRIPT_SOURCE:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(SCRIPT_SOURCE)
        tmp.chmod(0o755)
        os.replace(tmp, path)
    return path


def _known(executor: Executor, key: str) -> JobState | None:
    try:
        return executor.poll(key)
    except ToolError:
        return None  # not in the ledger


def _run(executor: Executor, spec: JobSpec, poll_s: float) -> tuple[JobState, str]:
    executor.launch(spec)
    while not (state := executor.poll(spec.key)).done:
        time.sleep(poll_s)
    return state, executor.read_log(spec.key, 4000)


def _fetch_manifest(executor: Executor, run_dir: Path) -> None:
    executor.fetch_run_file(Path(run_dir) / MANIFEST)  # a shared run folder (Slurm) already has it


def _python(executor: Executor) -> str:
    return executor.host_python


def install_on_host(executor: Executor, merged: list[Path], run_dir: Path, *, sglang_python: str | None,
                    sglang_src: str | None, config_dir: str | None = None, poll_s: float = 0.3) -> Manifest:
    """Install ``merged`` into the host SGLang's config folder through ``executor``; the local manifest."""
    run_dir = Path(run_dir).resolve()
    script = write_host_script(run_dir)
    digest = hashlib.sha256(b"".join(Path(p).name.encode() + Path(p).read_bytes() for p in sorted(merged)))
    argv = [_python(executor), str(script), "install", str(run_dir), executor_label(executor)]
    for flag, value in (("--config-dir", config_dir), ("--sglang-python", sglang_python), ("--sglang-src", sglang_src)):
        if value:
            argv += [flag, value]
    argv += [str(Path(p).resolve()) for p in merged]
    # The job is the install of these files (their digest); a job a crash cut short is tried again as a new
    # attempt, and the script finishes or undoes the install it interrupted (tools/tuning/host_install.py).
    identity = {"install": digest.hexdigest()}
    attempt = next_attempt(executor, f"install-configs-{digest.hexdigest()[:10]}", identity)
    spec = JobSpec(key=attempt.key, argv=argv, kind="install", lane="gpu", gpus=[], timeout_s=JOB_TIMEOUT_S,
                   grace_s=5.0, identity=identity)
    if attempt.verdict in ("launch", "attach"):
        with side_effect("starting the install job on the GPU host"):
            executor.launch(spec)
    state, log = _run(executor, spec, poll_s)
    _fetch_manifest(executor, run_dir)
    if state.status != "succeeded":
        raise ToolError(f"installing the tuned configs on the GPU host failed ({state.status}: {state.reason}): "
                        f"{cap_text(log.strip(), 1500).text}")
    manifest = load_manifest(run_dir / MANIFEST)
    if manifest.state != "installed":
        raise ToolError(f"the install job on the GPU host ended but its manifest says {manifest.state!r}; see "
                        f"{executor.job_dir(spec.key) / 'log.txt'}")
    return manifest


def uninstall_on_host(executor: Executor, run_dir: Path, force: bool = False, poll_s: float = 0.3) -> UninstallResult:
    """Undo this run's host install through ``executor`` (the host's manifest is the truth)."""
    run_dir = Path(run_dir).resolve()
    script = write_host_script(run_dir)
    key = next(k for k in (f"uninstall-configs-{n}" for n in range(1, 1000)) if _known(executor, k) is None)
    argv = [_python(executor), str(script), "uninstall", str(run_dir), *(["--force"] if force else [])]
    state, log = _run(executor, JobSpec(key=key, argv=argv, kind="install", lane="gpu", gpus=[],
                                        timeout_s=JOB_TIMEOUT_S, grace_s=5.0), poll_s)
    _fetch_manifest(executor, run_dir)
    if state.status != "succeeded":
        raise ToolError(f"uninstalling on the GPU host failed ({state.status}: {state.reason}): "
                        f"{cap_text(log.strip(), 1500).text}")
    for line in reversed(log.strip().splitlines()):
        try:
            return UninstallResult.model_validate(json.loads(line))
        except ValueError:
            continue
    raise ToolError(f"the uninstall job on the GPU host printed no result; see {executor.job_dir(key) / 'log.txt'}")
