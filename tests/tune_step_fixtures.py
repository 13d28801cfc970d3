"""The tune_kernels step's context and plan steps, shared by the tuning tests (tests/test_tuning_*.py):
a step context on a fresh run folder, GPUs from the nvidia-smi double, the script double's controls."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from agent.run.folder import RunFolder
from agent.run.trace import TraceWriter
from agent.settings.layers import load_settings
from agent.steps.base import PlanStep, StepContext
from tests.tuning_fixtures import NVIDIA_SMI_DOUBLE
from tools.gpu_choice import choose_gpus
from tools.gpus import DetectGpusArgs, DetectGpusResult, detect_gpus
from tools.jobs import LocalExecutor

REPO = Path(__file__).resolve().parents[1]
SGLANG_PYTHON = str(REPO / "tests/doubles/sglang_python")
SHAPES = ["4096,7168", "7168,2048", "3072,1536"]
NO_DEEPGEMM = {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}  # H200 with DeepGEMM off: SGLang serves FP8 GEMMs with Triton


def tune_context(tmp_path, gpu_infos, sglang_root, **settings):
    run_folder = RunFolder(tmp_path / "run")
    run_folder.path.mkdir(exist_ok=True)
    (run_folder.path / "config.json").write_text("{}")
    values = {"shapes": SHAPES, "sglang_python": sys.executable, "runs_dir": str(tmp_path), **settings}
    chosen = load_settings(values, cwd=tmp_path, environ={})
    plan = choose_gpus(DetectGpusResult(gpus=gpu_infos), wanted=chosen.gpus, tp=chosen.tp,
                       target_gpus=chosen.target_gpus).plan  # preflight's plan, as the campaign makes it
    return StepContext(settings=chosen, run=run_folder, trace=TraceWriter(run_folder.trace_path),
                       executor=LocalExecutor(run_folder.jobs_dir), gpus=gpu_infos, sglang_root=sglang_root,
                       lane="gpu", gpu_plan=plan)


def fake_gpus(count):
    os.environ["DSV4_FAKE_GPUS"] = str(count)
    try:
        return detect_gpus(DetectGpusArgs(nvidia_smi=str(NVIDIA_SMI_DOUBLE))).gpus
    finally:
        del os.environ["DSV4_FAKE_GPUS"]


def double_env(monkeypatch, tmp_path, unit_s="0.02"):
    """Controls of the script double (environment of the jobs: process-boundary configuration)."""
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("DSV4_DOUBLE_CALLS", str(calls))
    monkeypatch.setenv("DSV4_DOUBLE_UNIT_S", unit_s)
    return calls


TUNE_STEP = PlanStep(kind="tune_kernels", lane="gpu", why="goal says tune kernels",
                     params={"batch_sizes": [1, 16, 256], "poll_s": 0.1, "server_args": ["--fp8-gemm-backend", "triton"]})


def discovery_step(**params) -> PlanStep:
    return PlanStep(kind="tune_kernels", lane="gpu", why="goal says tune kernels",
                    params={"batch_sizes": [1, 16], "poll_s": 0.1, "env": NO_DEEPGEMM, **params})
