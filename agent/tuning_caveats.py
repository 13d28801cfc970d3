"""Said at plan time: why a planned kernel tuning will not run, or will not change the server.

Tuning needs SGLang's tuning script (a git checkout has it in benchmark/; a wheel has none), and it
tunes the Triton block-FP8 GEMM, which SGLang does not run where DeepGEMM serves those GEMMs (Hopper
and newer, by default). The GPU host may be far off and the run planned for days: so each reason
is said in plan.md and on the console when the plan is made, with the fix.
"""
from __future__ import annotations

from pathlib import Path

from agent.preflight import Preflight
from agent.steps.base import PlanStep
from tools.base import ToolError
from tools.tuning.engagement import EngagementArgs, check_engagement
from tools.tuning.script import find_script

DEEPGEMM_FIX = ("to tune the Triton path anyway, serve without DeepGEMM: --server-env SGLANG_ENABLE_JIT_DEEPGEMM=0 "
                "(or --server-arg '--fp8-gemm-backend triton')")


def will_not_happen(steps: list[PlanStep], preflight: Preflight, settings) -> list[str]:
    """One line per reason the plan's kernel tuning will not run or not matter (empty: none known)."""
    if not any(step.kind == "tune_kernels" for step in steps):
        return []
    lines = []
    try:
        find_script(Path(preflight.sglang_root) if preflight.sglang_root else None)
    except ToolError as err:
        lines.append(f"kernel tuning will not run: {err}")
    env = dict(entry.partition("=")[::2] for entry in settings.server_env)
    args = [word for entry in settings.server_args for word in entry.split()]
    gpu = preflight.gpus[0].name if preflight.gpus else ""
    engaged = check_engagement(EngagementArgs(server_args=args, env=env, gpu_name=gpu,
                                              sglang_root=preflight.sglang_root))
    if engaged.verdict == "not_engaged":
        lines.append(f"kernel tuning will not change the server: it does not run the Triton block-FP8 GEMM "
                     f"({'; '.join(engaged.evidence)}); {DEEPGEMM_FIX}")
    elif engaged.basis == "no_gpu" and not args and not env:
        lines.append("kernel tuning may not change the server: on Hopper and newer GPU hosts (H100, H200) SGLang "
                     f"serves these GEMMs with DeepGEMM and the tuned configs go unused; {DEEPGEMM_FIX}")
    return lines
