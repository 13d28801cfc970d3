"""GPUs that are not the user's are never taken (issue 13 item 2), through the CLI with the
``nvidia-smi`` double (tests/doubles/nvidia_smi: GPUs, memory used and compute processes in the
real tool's CSV format): CUDA_VISIBLE_DEVICES is honoured, busy GPUs are named with who holds them,
bad --gpus / --tp are usage errors naming the GPUs that exist, and a plan made without GPUs says
which TP it assumed. The generated scripts take TP and GPUS from the environment. The campaigns here
plan or refuse before any job starts, so the CLI runs in this process (tests/cli_helpers.run_cli):
GPU detection still runs the double as a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, campaign_env
from tests.cli_helpers import only_run, run_cli
from tests.messages import assert_refusal
from tests.slowdown import limit

GOAL = "enable MTP"


def _env(tmp_path: Path, gpus: int, **extra: str) -> dict[str, str]:
    return {**campaign_env(tmp_path, gpus=gpus), **extra}


def _runs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "runs"
    return [p for p in folder.iterdir() if p.is_dir()] if folder.exists() else []


def test_cuda_visible_devices_is_honoured(tmp_path):
    out = run_cli(GOAL, "--plan-only", cwd=tmp_path, env=_env(tmp_path, 4, CUDA_VISIBLE_DEVICES="2"))
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    preflight = json.loads((run / "preflight.json").read_text())
    assert [g["index"] for g in preflight["gpus"]] == [2]
    assert any("CUDA_VISIBLE_DEVICES='2' hides GPU 0, 1, 3" in n for n in preflight["notes"])
    serve = (run / "serve_baseline.sh").read_text()
    assert "export CUDA_VISIBLE_DEVICES=2\n" in serve and "TP=${TP:-1}" in serve
    assert "0,1,2,3" not in serve and "--tp-size 4" not in serve


def test_a_busy_gpu_is_refused_naming_who_holds_it(tmp_path):
    busy = {"DSV4_FAKE_GPU_APPS": "1:4242:/usr/bin/python3:70000"}
    out = run_cli(GOAL, cwd=tmp_path, env=_env(tmp_path, 2, **busy))
    assert_refusal(out, "GPU 1", "NVIDIA A100-SXM4-80GB", "busy", "pid 4242", "/usr/bin/python3", "70000 MiB",
                   "--gpus 0", "--allow-busy-gpus")
    assert _runs(tmp_path) == []  # nothing half-made
    hidden = {"DSV4_FAKE_GPU_MEMORY": "0:30000"}  # a process nvidia-smi cannot list (another container)
    out = run_cli(GOAL, "--gpus", "0", cwd=tmp_path, env=_env(tmp_path, 2, **hidden))
    assert_refusal(out, "GPU 0", "30001 MiB", "nvidia-smi does not list")
    allowed = run_cli(GOAL, "--plan-only", "--allow-busy-gpus", cwd=tmp_path, env=_env(tmp_path, 2, **busy))
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


@pytest.mark.parametrize("request_args, names", [
    (["--gpus", "5"], ["--gpus", "GPU 5", "0 (NVIDIA A100-SXM4-80GB)", "1 (NVIDIA A100-SXM4-80GB)"]),
    (["--gpus", "-1"], ["--gpus", "GPU indices", "0 or more", "'-1'"]),
    (["--tp", "2", "--gpus", "0"], ["--tp 2", "2 GPUs", "1"]),
    (["--gpus", "0,,9"], ["--gpus", "'0,,9'", "empty entry"]),
    (["--gpus", "1,1"], ["--gpus", "1", "more than once"]),
    (["--tp", "4"], ["--tp 4", "4 GPUs", "2"]),
    (["--tp", "0"], ["--tp", "1"]),  # the least it takes
    (["--target-gpus", "8"], ["--target-gpus", "without GPUs"]),
])
def test_a_gpu_request_that_cannot_be_met_is_a_usage_error(tmp_path, request_args, names):
    out = run_cli(GOAL, *request_args, cwd=tmp_path, env=_env(tmp_path, 2))  # refused before anything starts
    assert_refusal(out, *names)
    assert _runs(tmp_path) == []


def test_a_plan_without_gpus_says_which_tp_it_assumed(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi
    out = run_cli(GOAL, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "assumed TP 8" in out.stdout and "--target-gpus N" in out.stdout
    serve = (only_run(tmp_path) / "serve_baseline.sh").read_text()
    assert "TP=${TP:-8}" in serve and "--tp-size 1" not in serve
    four = run_cli(GOAL, "--target-gpus", "4", "--runs-dir", "four", cwd=tmp_path, env=env)
    assert four.returncode == 0, four.stdout + four.stderr
    assert "TP=${TP:-4}" in next((tmp_path / "four").glob("*/serve_baseline.sh")).read_text()
    bad = run_cli(GOAL, "--target-gpus", "2", "--tp", "4", "--runs-dir", "bad", cwd=tmp_path, env=env)
    assert_refusal(bad, "--tp 4", "target", "2")


def _serve(script: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    dump = tmp_path / "argv.json"
    dump.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=limit(30), env={
        **{k: v for k, v in os.environ.items() if k not in ("TP", "GPUS", "CUDA_VISIBLE_DEVICES")},
        "SGLANG_PYTHON": str(DOUBLES / "argv_dump"), "ARGV_DUMP_FILE": str(dump), "PORT": "31999",
        "ARGV_DUMP_ENV": "CUDA_VISIBLE_DEVICES", "DSV4_DOUBLE_REAL_PYTHON": sys.executable, **env})
    return done, (json.loads(dump.read_text()) if dump.exists() else {})


def test_scripts_take_tp_and_gpus_from_the_environment(tmp_path):
    out = run_cli(GOAL, "--plan-only", cwd=tmp_path, env=_env(tmp_path, 2))
    assert out.returncode == 0, out.stdout + out.stderr
    script = only_run(tmp_path) / "serve_baseline.sh"
    done, seen = _serve(script, tmp_path)
    assert done.returncode == 0, done.stderr
    argv = seen["argv"]
    assert argv[argv.index("--tp-size") + 1] == "2" and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"  # planned
    done, seen = _serve(script, tmp_path, TP="1", GPUS="1")
    assert done.returncode == 0, done.stderr
    assert seen["argv"][seen["argv"].index("--tp-size") + 1] == "1" and seen["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    done, seen = _serve(script, tmp_path, TP="4", GPUS="0,1")
    assert done.returncode == 2 and "TP=4 needs 4 GPUs" in done.stderr and not seen
