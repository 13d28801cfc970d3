"""Benchmark and kernel-config install through the SSH executor, into a real OpenSSH server on loopback.

The "GPU host" is this machine reached through a private ``sshd`` (tests/services/start_sshd.sh).
What makes it another host for these tests:
- its run folder is ``~/.dsv4-agent/runs/<run>-<tag>``, not the local run folder (paths rewritten,
  inputs mirrored, outputs fetched: a result read locally must have come back);
- its SGLang is a *different copy* from the checkout the agent reads: sessions on the host get
  ``DSV4_DOUBLE_REAL_PYTHON`` (through sshd's ``AcceptEnv DSV4_*``) pointing at a launcher that puts
  that copy on ``PYTHONPATH``, so only there does the SGLang python import ``sglang`` (from the
  host copy), while locally the same interpreter path has no sglang and the agent falls back to
  its checkout. An install done locally would land in the checkout and is caught.
The doubles (tests/campaign_fixtures.py, each says so) are the only stand-ins: nvidia-smi, the
tuning script, the SGLang server behind the SGLang python; the bench client is SGLang's real one.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, GPU_NAME, campaign_args
from tests.cli_helpers import only_run, run_cli
from tests.conftest import require_binary
from tests.slowdown import limit
from tools.jobs.executor import free_local_port
from tools.jobs.factory import make_executor
from tools.measure.bench import run_sweep
from tools.measure.results import parse_jsonl
from tools.scripts import MeasurePlan
from tools.tuning.configs import parse_config_file_name

SERVICES = Path(__file__).parent / "services"
LOCAL_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the laptop: no nvidia-smi
GEMM = "sglang/kernels/ops/gemm"


def _free_port() -> int:
    return free_local_port()  # outside the ephemeral range: no client connection takes it meanwhile


def _host_sglang(base: Path, wheel_root: Path) -> Path:
    """The host's installed SGLang: the wheel's package marker, kernel module and real configs/ folder
    (enough for ``find_spec('sglang')`` and the config-folder lookup; nothing imports it)."""
    site = base / "host-site-packages"
    (site / GEMM).mkdir(parents=True)
    shutil.copy(wheel_root / "sglang" / "__init__.py", site / "sglang" / "__init__.py")
    shutil.copy(wheel_root / GEMM / "fp8_kernel.py", site / GEMM / "fp8_kernel.py")
    shutil.copytree(wheel_root / GEMM / "configs", site / GEMM / "configs")
    return site


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory, sglang_wheel_root):
    """A private sshd whose sessions look like a 2-GPU host with SGLang installed; yields
    (ssh_config path, the host's sglang site folder)."""
    require_binary("ssh")
    require_binary("sshd")
    base = tmp_path_factory.mktemp("gpu-host")
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "DSV4_SERVICES_DIR": str(base), "DSV4_SSHD_PORT": str(_free_port())}
    subprocess.run([str(SERVICES / "start_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))
    site = _host_sglang(base, sglang_wheel_root)
    launcher = base / "host_python"
    launcher.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    launcher.chmod(0o755)
    config = base / "ssh_config"
    host_env = (f'SetEnv DSV4_FAKE_GPUS=2 "DSV4_FAKE_GPU_NAME={GPU_NAME}" "DSV4_DOUBLE_DEVICE_NAME={GPU_NAME}" '
                f"DSV4_DOUBLE_UNIT_S=0.05 DSV4_DOUBLE_CALLS={base / 'tune_calls.txt'} "
                f"DSV4_DOUBLE_REAL_PYTHON={launcher}")
    config.write_text((base / "sshd" / "ssh_config").read_text() + f"    {host_env}\n")
    try:
        yield config, site
    finally:
        subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, check=True, capture_output=True, timeout=limit(60))


def _ssh_args(config: Path) -> list[str]:
    return ["--executor", "ssh://dsv4-test", "--ssh-option=-F", f"--ssh-option={config}",
            "--nvidia-smi", str(DOUBLES / "nvidia_smi")]


def _tuned_names(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.json") if (parse_config_file_name(p.name) or {}).get("device_name")
            == GPU_NAME.replace(" ", "_")}


def test_mtp_and_tuning_campaign_through_ssh_measures_and_installs_on_the_host(gpu_host, tmp_path,
                                                                                sglang_wheel_root):
    config, site = gpu_host
    host_configs = site / GEMM / "configs"
    before_host = {p.name: p.read_bytes() for p in host_configs.glob("*.json")}
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, concurrency="1,2"), *_ssh_args(config), cwd=tmp_path, env=LOCAL_ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished", result
    assert result["steps"]["benchmark"] == "done" and result["steps"]["tune_kernels"] == "done", result
    remote_run = Path(json.loads((run / "jobs" / "executor.json").read_text())["remote_run_abs"])
    assert remote_run != run.resolve()

    # Benchmark: every variant, every point, measured on the host and its JSONL brought back.
    plan = json.loads((run / "measure_plan.json").read_text())
    variants = [v["name"] for v in plan["variants"]]
    assert len(variants) == 2
    for variant in variants:
        local = run / "bench" / f"{variant}.jsonl"
        records = parse_jsonl(local, variant).records
        assert sorted(r.concurrency for r in records) == [1, 2]
        assert local.read_bytes() == (remote_run / "bench" / f"{variant}.jsonl").read_bytes()
        for c in (1, 2):
            job = json.loads((remote_run / "jobs" / f"bench-{variant}-c{c}" / "job.json").read_text())
            assert job["argv"][job["argv"].index("--output-file") + 1] == f"{remote_run}/bench/{variant}.jsonl"
        server = json.loads((remote_run / "jobs" / f"serve-{variant}" / "job.json").read_text())
        assert "sglang.launch_server" in server["argv"]
        assert not (run / "jobs" / f"serve-{variant}" / "forward.json").exists()  # our ssh -L was stopped
        snaps = [json.loads(line) for line in (run / "bench" / "snapshots" / f"{variant}.jsonl").read_text().splitlines()]
        assert [s["phase"] for s in snaps] == ["before", "after"] * 2
        assert all(s["generation_tokens"] is not None and not s["errors"] for s in snaps), snaps  # via the forward
    # A re-run (e.g. a resume after a crash) re-runs no finished point and starts no server.
    executor = make_executor("ssh://dsv4-test", run / "jobs", ssh_options=["-F", str(config)])
    jobs_before = sorted(s.key for s in executor.jobs())
    again = run_sweep(executor, MeasurePlan.model_validate(plan), str(DOUBLES / "sglang_python"), run / "bench")
    assert not again.done and not again.failures and len(again.skipped) == 4
    assert sorted(s.key for s in executor.jobs()) == jobs_before
    mtp = next(v for v in variants if v != "baseline")
    mtp_records = parse_jsonl(run / "bench" / f"{mtp}.jsonl", mtp).records
    assert all(r.accept_length and r.accept_length > 1 for r in mtp_records)

    # Tuning: installed into the host's SGLang, not into the checkout the agent read.
    manifest = json.loads((run / "tuning" / "manifest.json").read_text())
    assert manifest["installed_by"] == "ssh://dsv4-test" and manifest["state"] == "installed"
    assert manifest["config_dir"] == str(host_configs.resolve())
    installed = {e["name"] for e in manifest["entries"]}
    assert len(installed) == 2 and _tuned_names(host_configs) >= installed
    for entry in manifest["entries"]:
        assert Path(entry["target"]).read_bytes() == (run / "tuning" / "merged" / entry["name"]).read_bytes()
    checkout_configs = tmp_path / "sglang-checkout" / "python" / GEMM / "configs"
    assert not (_tuned_names(checkout_configs) & installed)  # nothing landed locally
    assert (run / "tuning" / "install_configs.py").exists()  # the reviewable script that ran there

    # Uninstall acts on the host too, and puts its folder back exactly (the ssh options given again:
    # a run folder's are never used).
    ssh = ["--ssh-option=-F", f"--ssh-option={config}"]
    undone = run_cli("tuning", "uninstall", "latest", *ssh, cwd=tmp_path, env=LOCAL_ENV)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert {p.name: p.read_bytes() for p in host_configs.glob("*.json")} == before_host
    assert json.loads((run / "tuning" / "manifest.json").read_text())["state"] == "uninstalled"
    again = run_cli("tuning", "uninstall", "latest", *ssh, cwd=tmp_path, env=LOCAL_ENV)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
    shutil.rmtree(remote_run)
