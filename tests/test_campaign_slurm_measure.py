"""Benchmarks through the Slurm executor, on a real one-node Slurm on loopback (tests/services/start_slurm.sh).

The server of each variant and every bench client point are Slurm batch jobs; the server's node
and port are learnt once it runs (``scontrol show job`` BatchHost, the node's NodeAddr, the port
the node picked and recorded in the shared run folder), the agent probes readiness and takes the
accept-length snapshots at that address, and the clients' JSONL lands in the run folder in place.
The doubles (tests/campaign_fixtures.py, each says so) are the only stand-ins: the node's GPUs
(fake gres), the SGLang server behind the SGLang python; the bench client is SGLang's real one.
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, MODEL, campaign_args
from tests.cli_helpers import only_run, run_cli
from tools.measure.bench import run_sweep
from tools.jobs.slurm.executor import SlurmExecutor
from tools.measure.results import parse_jsonl
from tools.scripts import MeasurePlan
from tools.scripts.models import ServeVariant
from tools.measure.server import launch_server, probe_ready, stop_server

# One Slurm cluster for the whole session: these tests share one xdist worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("slurm")


def _node_address(slurm_env: dict[str, str]) -> str:
    conf = Path(slurm_env["SLURM_CONF"]).read_text()
    return conf.split(" NodeAddr=")[1].split()[0]  # what start_slurm.sh configured: 127.0.0.1


def test_mtp_campaign_through_slurm_measures_every_point_with_jobs_on_the_node(slurm, tmp_path,
                                                                              sglang_wheel_root):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "SLURM_CONF": slurm.env["SLURM_CONF"]}  # no nvidia-smi here
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP", concurrency="1,2"), "--executor", "slurm:debug",
                  cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished", result
    assert result["steps"]["benchmark"] == "done", result

    plan = json.loads((run / "measure_plan.json").read_text())
    variants = [v["name"] for v in plan["variants"]]
    assert len(variants) == 2
    address = _node_address(slurm.env)
    for variant in variants:
        records = parse_jsonl(run / "bench" / f"{variant}.jsonl", variant).records
        assert sorted(r.concurrency for r in records) == [1, 2]
        server_dir = run / "jobs" / f"serve-{variant}"
        server = json.loads((server_dir / "job.json").read_text())
        assert server["argv"][1].endswith("slurm_serve.py") and "sglang.launch_server" in server["argv"]
        argv = server["argv"]
        assert argv[argv.index("--host") + 1] == "0.0.0.0" and argv[argv.index("--port") + 1] == "DSV4_PORT"
        endpoint = json.loads((server_dir / "endpoint.json").read_text())
        assert endpoint["node"] == socket.gethostname().split(".")[0]  # the node Slurm ran it on
        assert f"server on node {endpoint['node']}, port {endpoint['port']}" in (server_dir / "log.txt").read_text()
        assert (server_dir / "slurm.json").exists()  # a Slurm job, not a local process
        for c in (1, 2):
            job_dir = run / "jobs" / f"bench-{variant}-c{c}"
            assert (job_dir / "slurm.json").exists()
            job = json.loads((job_dir / "job.json").read_text())
            words = job["argv"]
            assert words[words.index("--host") + 1] == address
            assert words[words.index("--port") + 1] == str(endpoint["port"])
            assert words[words.index("--output-file") + 1] == str((run / "bench" / f"{variant}.jsonl").resolve())
        assert json.loads((server_dir / "exit.json").read_text())["reason"] == "stopped"
        snaps = [json.loads(line) for line in (run / "bench" / "snapshots" / f"{variant}.jsonl").read_text().splitlines()]
        assert [s["phase"] for s in snaps] == ["before", "after"] * 2
        assert all(s["generation_tokens"] is not None and not s["errors"] for s in snaps), snaps
    mtp = next(v for v in variants if v != "baseline")
    assert all(r.accept_length and r.accept_length > 1 for r in parse_jsonl(run / "bench" / f"{mtp}.jsonl", mtp).records)

    # A re-run (a resume after a crash) re-runs no finished point and submits no job.
    executor = SlurmExecutor(run / "jobs", env=slurm.env)
    jobs_before = sorted(s.key for s in executor.jobs())
    again = run_sweep(executor, MeasurePlan.model_validate(plan), str(DOUBLES / "sglang_python"), run / "bench")
    assert not again.done and not again.failures and len(again.skipped) == 4
    assert sorted(s.key for s in executor.jobs()) == jobs_before


def test_a_running_slurm_server_is_found_again_by_its_key(slurm, tmp_path):
    executor = SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env)
    variant = ServeVariant(name="baseline", model_path=MODEL, gpus=[0])
    python = str(DOUBLES / "sglang_python")
    first = launch_server(executor, variant, python, key="serve-baseline", ready_timeout_s=120)
    try:
        assert not first.attached and first.host == _node_address(slurm.env)
        job_id = json.loads((executor.job_dir(first.key) / "slurm.json").read_text())["job_id"]
        # the agent restarted: a fresh executor, the same key -> the same Slurm job, node and port
        again = launch_server(SlurmExecutor(tmp_path / "run" / "jobs", env=slurm.env), variant, python,
                              key="serve-baseline", ready_timeout_s=120)
        assert again.attached and (again.url, again.port) == (first.url, first.port)
        assert json.loads((executor.job_dir(first.key) / "slurm.json").read_text())["job_id"] == job_id
        assert len(list((tmp_path / "run" / "jobs").glob("*.sbatch"))) == 1  # submitted once
    finally:
        assert stop_server(executor, first.key).status == "stopped"
    assert not probe_ready(first.url)
