"""Said at plan time: why a planned kernel tuning will not run, or will not change the server.

Tuning needs SGLang's tuning script (a git checkout has it in benchmark/; a wheel has none), and it
tunes the Triton block-FP8 GEMM, which SGLang does not run where DeepGEMM serves those GEMMs (Hopper
and newer, by default). The GPU host may be far off and the run planned for days: so each reason
is said in plan.md and on the console when the plan is made, with the fix. Worked out in preflight
(recorded in preflight.json, which a replay serves again), where the host's files are read.
"""
from __future__ import annotations

from pathlib import Path

from tools.base import ToolError
from tools.tuning.engagement import EngagementArgs, check_engagement
from tools.tuning.script import find_script

DEEPGEMM_FIX = ("to tune the Triton path anyway, serve without DeepGEMM: --server-env SGLANG_ENABLE_JIT_DEEPGEMM=0 "
                "(or --server-arg '--fp8-gemm-backend triton')")


def tuning_caveats(settings, gpu_name: str, sglang_root: str | None) -> list[str]:
    """One line per reason kernel tuning would not run or not matter here (empty: none known); preflight
    works it out once, for every run, and the plan says it when it tunes (agent/campaign/planner.py)."""
    lines = []
    try:
        find_script(Path(sglang_root) if sglang_root else None)
    except ToolError as err:
        lines.append(f"kernel tuning will not run: {err}")
    env = dict(entry.partition("=")[::2] for entry in settings.server_env)
    args = [word for entry in settings.server_args for word in entry.split()]
    try:
        engaged = check_engagement(EngagementArgs(server_args=args, env=env, gpu_name=gpu_name,
                                                  sglang_root=sglang_root))
    except ToolError:  # a source that is no SGLang: the preflight notes say so
        return lines
    if engaged.verdict == "not_engaged":
        lines.append(f"kernel tuning will not change the server: it does not run the Triton block-FP8 GEMM "
                     f"({'; '.join(engaged.evidence)}); {DEEPGEMM_FIX}")
    elif engaged.basis == "no_gpu" and not args and not env:
        lines.append("kernel tuning may not change the server: on Hopper and newer GPU hosts (H100, H200) SGLang "
                     f"serves these GEMMs with DeepGEMM and the tuned configs go unused; {DEEPGEMM_FIX}")
    return lines
