"""Whole campaigns whose GPU jobs run through the SSH executor, into a real OpenSSH server on loopback.

The "GPU host" is this machine reached through a private ``sshd`` (tests/services/start_sshd.sh,
own port and keys): the agent side has no GPU (no nvidia-smi on its PATH), the host side gets the
doubles' environment through ``SetEnv`` (sshd ``AcceptEnv DSV4_*``) — 2 fake GPUs, the tuning-script
double's knobs. The run's remote folder (``~/.dsv4-agent/runs/...``) differs from the local run
folder, so every path in the jobs is really rewritten and the outputs really fetched back. The
doubles (tests/campaign_fixtures.py) are the only stand-ins: nvidia-smi, the tuning script, the
SGLang interpreter.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, GPU_NAME, campaign_args
from tests.cli_helpers import only_run, run_cli
from tests.conftest import require_binary
from tests.messages import assert_run_setting_refused
from tests.slowdown import limit
from tools.base import ToolError
from tools.jobs.executor import free_local_port
from tools.jobs.factory import make_executor
from tools.jobs.local import LocalExecutor
from tools.jobs.spec import JobSpec

SERVICES = Path(__file__).parent / "services"
LOCAL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the laptop: no nvidia-smi


def _free_port() -> int:
    return free_local_port()  # outside the ephemeral range: no client connection takes it meanwhile


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory):
    """A private sshd whose sessions look like a 2-GPU host; yields (ssh_config path, calls file)."""
    require_binary("ssh")
    require_binary("sshd")
    base = tmp_path_factory.mktemp("gpu-host")
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "DSV4_SERVICES_DIR": str(base), "DSV4_SSHD_PORT": str(_free_port())}
    subprocess.run([str(SERVICES / "start_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))
    calls = base / "tune_calls.txt"
    config = base / "ssh_config"
    host_env = (f'SetEnv DSV4_FAKE_GPUS=2 "DSV4_FAKE_GPU_NAME={GPU_NAME}" "DSV4_DOUBLE_DEVICE_NAME={GPU_NAME}" '
                f"DSV4_DOUBLE_UNIT_S=0.05 DSV4_DOUBLE_CALLS={calls} DSV4_DOUBLE_REAL_PYTHON={sys.executable}")
    config.write_text((base / "sshd" / "ssh_config").read_text() + f"    {host_env}\n")
    try:
        yield config, calls
    finally:
        subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))


def _ssh_args(config: Path) -> list[str]:
    return ["--executor", "ssh://dsv4-test", "--ssh-option=-F", f"--ssh-option={config}",
            "--nvidia-smi", str(DOUBLES / "nvidia_smi")]


def _assert_tuned_on_the_host(run: Path, calls: Path) -> Path:
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished", result
    assert result["steps"] == {"tune_kernels": "done"}
    preflight = json.loads((run / "preflight.json").read_text())
    assert [g["name"] for g in preflight["gpus"]] == [GPU_NAME, GPU_NAME]  # the host's GPUs, not ours (none)
    record = json.loads((run / "jobs" / "executor.json").read_text())
    remote_run = Path(record["remote_run_abs"])
    assert remote_run.is_absolute() and remote_run != run.resolve() and str(run.resolve()) not in str(remote_run)
    for gpu in (0, 1):
        job = json.loads((remote_run / "jobs" / f"tune-gpu{gpu}" / "job.json").read_text())
        # the job ran the host's copy of the script, in the host's copy of the tuning folder
        assert job["argv"] == ["bash", f"{remote_run}/tuning/tune_gpu{gpu}.sh"]
        assert job["cwd"] == f"{remote_run}/tuning"
        assert str(run.resolve()) not in json.dumps(job)
        assert (remote_run / "tuning" / f"tune_gpu{gpu}.sh").read_text() == (run / "tuning" / f"tune_gpu{gpu}.sh").read_text()
    remote_out = sorted(p.relative_to(remote_run) for p in (remote_run / "tuning" / "out").rglob("*.json"))
    local_out = sorted(p.relative_to(run) for p in (run / "tuning" / "out").rglob("*.json"))
    assert remote_out and local_out == remote_out  # outputs came back into the same relative paths
    installed = json.loads((run / "steps" / "tune_kernels.json").read_text())["data"]["installed"]
    assert len(installed) == 2 and all(Path(p).exists() for p in installed)
    unit_calls = Counter(calls.read_text().splitlines())
    assert unit_calls and max(unit_calls.values()) == 1  # every unit tuned exactly once, on the host
    return remote_run


def test_tune_kernels_campaign_through_ssh(gpu_host, tmp_path, sglang_wheel_root):
    config, calls = gpu_host
    calls.unlink(missing_ok=True)
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), *_ssh_args(config),
                  cwd=tmp_path, env=LOCAL_ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    remote_run = _assert_tuned_on_the_host(run, calls)
    assert any("GPU jobs run through ssh://dsv4-test" in n for n in json.loads((run / "preflight.json").read_text())["notes"])
    # `jobs` takes the run folder's ssh options back only while the user allows the folder (the agent
    # allowed the run it made); forgotten, they must be given again
    own = run_cli("jobs", "latest", cwd=tmp_path, env=LOCAL_ENV)
    assert own.returncode == 0 and "tune-gpu0" in own.stdout, own.stderr
    assert run_cli("config", "deny", str(run), cwd=tmp_path, env=LOCAL_ENV).returncode == 0
    refused = run_cli("jobs", "latest", cwd=tmp_path, env=LOCAL_ENV)  # the host is judged first, then its options
    assert_run_setting_refused(refused, "executor", "--executor=ssh://dsv4-test")
    refused = run_cli("jobs", "latest", "--executor", "ssh://dsv4-test", cwd=tmp_path, env=LOCAL_ENV)
    assert_run_setting_refused(refused, "ssh_options", f"--ssh-option={config}")
    listed = run_cli("jobs", "latest", "--executor", "ssh://dsv4-test", "--ssh-option=-F", f"--ssh-option={config}",
                     cwd=tmp_path, env=LOCAL_ENV)
    assert listed.returncode == 0, listed.stderr
    assert "tune-gpu0" in listed.stdout and "succeeded" in listed.stdout
    shutil.rmtree(remote_run)  # the host's copy of the run (under this user's ~/.dsv4-agent)


def test_planned_run_resumed_with_an_ssh_executor(gpu_host, tmp_path, sglang_wheel_root):
    config, calls = gpu_host
    calls.unlink(missing_ok=True)
    planned = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), cwd=tmp_path, env=LOCAL_ENV)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    run = only_run(tmp_path)
    assert json.loads((run / "result.json").read_text())["status"] == "planned"
    assert not calls.exists()  # nothing ran here
    resumed = run_cli("resume", "latest", *_ssh_args(config), cwd=tmp_path, env=LOCAL_ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    remote_run = _assert_tuned_on_the_host(run, calls)
    assert json.loads((run / "config.json").read_text())["settings"]["executor"] == "ssh://dsv4-test"
    shutil.rmtree(remote_run)


def test_a_run_with_local_jobs_keeps_its_executor(tmp_path):
    require_binary("ssh")
    jobs_root = tmp_path / "run" / "jobs"
    local = LocalExecutor(jobs_root)
    local.launch(JobSpec(key="tune-gpu0", argv=["true"]))
    with pytest.raises(ToolError, match=r"launched with executor 'local'.*--executor local"):
        make_executor("ssh://dsv4-test", jobs_root)
    assert not (jobs_root / "executor.json").exists()  # the refusal changed nothing


def test_ssh_executor_switch_before_any_job_takes_the_new_one(tmp_path):
    require_binary("ssh")
    jobs_root = tmp_path / "run" / "jobs"
    first = make_executor("ssh://host-a", jobs_root)
    assert json.loads((jobs_root / "executor.json").read_text())["url"] == "ssh://host-a"
    second = make_executor("ssh://host-b", jobs_root)  # no job ever ran: host-b takes over
    assert json.loads((jobs_root / "executor.json").read_text())["url"] == "ssh://host-b"
    assert second.remote_root != first.remote_root
