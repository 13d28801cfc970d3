"""A whole campaign through the SSH executor rides out a restart of the host's sshd.

The "GPU host" is this machine reached through a private sshd (tests/own_sshd.py), whose sessions get
the doubles' environment (tests/campaign_fixtures.py), as in tests/test_campaign_remote.py. Mid-tuning
and mid-benchmark, with the jobs held inside their work by a file (so the outage lands while they
run, however slow the machine), sshd is taken down whole, its listener and every connection it
serves (the shared connection's, the port forward's), and started again after 12 s: the run waits it
out within ``--outage-wait 120`` and finishes. The outage's length is a fixed duration by nature; no
assertion depends on how fast anything ran.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, GPU_NAME, campaign_args
from tests.cli_helpers import only_run, start_agent
from tests.conftest import require_binary
from tests.own_sshd import OwnSshd
from tests.slowdown import limit, wait_for
from tools.jobs.executor import free_local_port

LOCAL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the laptop: no nvidia-smi
OUTAGE_S = 12.0


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory):
    """A private sshd whose sessions look like a 2-GPU host; tuning and bench requests are held while
    the files ``hold-tuning`` / ``hold-requests`` exist in its folder. Yields (sshd, ssh_config, folder)."""
    require_binary("ssh")
    require_binary("sshd")
    base = tmp_path_factory.mktemp("gpu-host")
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "DSV4_SERVICES_DIR": str(base), "DSV4_SSHD_PORT": str(free_local_port())}
    sshd = OwnSshd(env, base / "sshd")
    sshd.start()
    config = base / "ssh_config"
    host_env = (f'SetEnv DSV4_FAKE_GPUS=2 "DSV4_FAKE_GPU_NAME={GPU_NAME}" "DSV4_DOUBLE_DEVICE_NAME={GPU_NAME}" '
                f"DSV4_DOUBLE_UNIT_S=0.05 DSV4_DOUBLE_CALLS={base / 'tune_calls.txt'} "
                f"DSV4_DOUBLE_REAL_PYTHON={sys.executable} DSV4_DOUBLE_TUNE_HOLD_FILE={base / 'hold-tuning'} "
                f"DSV4_DOUBLE_HOLD_FILE={base / 'hold-requests'}")
    config.write_text((base / "sshd" / "ssh_config").read_text() + f"    {host_env}\n")
    try:
        yield sshd, config, base
    finally:
        if not (sshd.base / "sshd.pid").exists():
            sshd.start()  # so that stop ends what start began
        sshd.stop()


def _agent(root: Path, config: Path, wheel_root: Path, goal: str):
    return start_agent(*campaign_args(root, wheel_root, goal=goal), "--executor", "ssh://dsv4-test",
                       "--ssh-option=-F", f"--ssh-option={config}", "--nvidia-smi", str(DOUBLES / "nvidia_smi"),
                       "--outage-wait", "120", cwd=root, env=LOCAL_ENV)


def _restart_sshd_while_held(sshd: OwnSshd, hold: Path) -> None:
    sshd.take_down()
    try:
        time.sleep(OUTAGE_S)  # the outage itself: a fixed length by nature
    finally:
        sshd.start()
        hold.unlink()  # the held jobs go on


def _finished(proc, root: Path) -> tuple[Path, str]:
    output, _ = proc.communicate(timeout=limit(300))
    assert proc.returncode == 0, output
    run = only_run(root)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished", (result, output)
    assert "does not answer" in output and "answered again after" in output, output  # the outage was met
    assert "Traceback" not in output, output
    return run, output


def _remote_run(run: Path) -> Path:
    return Path(json.loads((run / "jobs" / "executor.json").read_text())["remote_run_abs"])


def _outage_during(gpu_host, root: Path, wheel_root: Path, goal: str, hold_name: str, started: str,
                   seconds: float, what: str) -> Path:
    """The campaign's jobs held on a file; sshd taken down for the outage once ``started`` exists; the run."""
    sshd, config, base = gpu_host
    hold = base / hold_name
    hold.touch()
    proc = _agent(root, config, wheel_root, goal)
    try:
        wait_for(lambda: list(root.glob(started)), seconds, what)
    except AssertionError:
        proc.kill()
        raise
    _restart_sshd_while_held(sshd, hold)
    return _finished(proc, root)[0]


def test_sshd_restarted_mid_tuning_the_run_finishes(gpu_host, tmp_path, sglang_wheel_root):
    run = _outage_during(gpu_host, tmp_path, sglang_wheel_root, "tune kernels", "hold-tuning",
                         "runs/*/jobs/tune-gpu1/job.json", 120, "both tuning jobs to start")
    assert json.loads((run / "result.json").read_text())["steps"] == {"tune_kernels": "done"}
    tuning_jobs = sorted(p.name for p in (run / "jobs").iterdir() if p.name.startswith("tune"))
    assert tuning_jobs == ["tune-gpu0", "tune-gpu1"], tuning_jobs  # re-attached through it, none started again
    shutil.rmtree(_remote_run(run))


def test_sshd_restarted_mid_benchmark_the_run_finishes(gpu_host, tmp_path, sglang_wheel_root):
    run = _outage_during(gpu_host, tmp_path, sglang_wheel_root, "enable MTP", "hold-requests",
                         "runs/*/jobs/bench-*/job.json", 180, "a benchmark point to start")
    assert json.loads((run / "result.json").read_text())["steps"]["benchmark"] == "done"
    plan = json.loads((run / "measure_plan.json").read_text())
    for variant in (v["name"] for v in plan["variants"]):
        assert (run / "bench" / f"{variant}.jsonl").read_text().strip(), variant  # every variant measured
    shutil.rmtree(_remote_run(run))
