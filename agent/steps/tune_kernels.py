"""Step ``tune_kernels``: FP8 block-GEMM kernel tuning. The decision tree (shapes, skip, discovery,
scripts, one job per GPU, merge, install) is ``tools.tuning.tune.tune_kernels``; this adapter maps the
campaign's settings and the step's params onto its arguments and records its outcome.

Params (``step.params``, all optional): ``log_files`` (server logs to mine), ``server_args`` and
``env`` (how the benchmark server will start: the engagement check and the discovery boot use
them), ``device_name`` (the target GPU when planning without one), ``batch_sizes``, ``config_dir``
(install target override), ``poll_s``, ``timeout_s``, ``discovery_timeout_s`` (readiness, 1800).
"""
from __future__ import annotations

from agent.steps.base import PlanStep, StepContext, StepOutcome
from tools.tuning.tune import TuneKernelsArgs, tune_kernels

PARAMS = ("log_files", "server_args", "env", "device_name", "batch_sizes", "config_dir", "poll_s", "timeout_s",
          "discovery_timeout_s")


def tuning_args(ctx: StepContext, step: PlanStep) -> TuneKernelsArgs:
    s = ctx.settings
    return TuneKernelsArgs(
        model=s.model, model_path=s.model_path, checkpoint_config=ctx.checkpoint_config,
        sglang_root=str(ctx.sglang_root) if ctx.sglang_root else None,
        sglang_src=s.sglang_src, sglang_python=s.sglang_python, gpus=ctx.gpus, gpu_plan=ctx.planned_gpus(),
        start_jobs=not s.plan_only,
        shapes=list(s.shapes or []), retune=s.retune, force_tune=s.force_tune,
        **{k: v for k, v in step.params.items() if k in PARAMS and v is not None})


def run(ctx: StepContext, step: PlanStep) -> StepOutcome:
    done = tune_kernels(tuning_args(ctx, step), ctx.executor, ctx.run.path, ctx)
    return StepOutcome(kind="tune_kernels", **done.model_dump())
