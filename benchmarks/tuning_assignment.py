"""Kernel-tuning fan-out on real jobs: measured makespan ÷ lower bound, beside SGLang's own split.

What is real: the agent's plan for the shapes of a DeepSeek-V4 config at TP8 and SGLang's 18
batch sizes, the per-GPU driver scripts it renders, one detached job per (fake) GPU under the
job manager, the fan-out that polls them, and the wall clock. What is assumed: the time of one
unit, the tuning-script double's "work" law (benchmarks/campaign_doubles.py: a fixed
part plus one growing with M·N·K), which the agent's own cost estimate does not know. The
reference, run the same way in the same round: SGLang's split (each GPU tunes every shape for a
round-robin slice of the batch sizes, as its script does). The lower bound comes from the units'
real times under that law. Makespan = first job launched to last job ended, from the ledger, so
process start-up and polling count.

The reference the goal is judged against is measured in the same round: the lower bound of the
work plus the makespan of the same jobs with every unit taking no time (bash, the interpreter, the
script's import, the config writes, the polling: what any split pays to run at all, and what a
loaded machine stretches). Goal: ours ÷ that reference <= 1.10. The makespan ÷ the bare lower bound
is printed beside it, for both splits.

    .venv/bin/python benchmarks/tuning_assignment.py [--gpus 4] [--unit-s 0.6] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from benchmarks.campaign_doubles import SCRIPT_DOUBLE, double_unit_seconds  # noqa: E402
from tools.jobs import LocalExecutor  # noqa: E402
from tools.tuning.fanout import FanoutJob, run_fanout  # noqa: E402
from tools.tuning.plan import DEFAULT_BATCH_SIZES, GpuWork, Unit, lower_bound, make_units, plan_units  # noqa: E402
from tools.tuning.render import render_tuning  # noqa: E402
from tools.tuning.script import introspect_script  # noqa: E402
from tools.tuning.shapes import derive_from_config  # noqa: E402

GOAL = 1.10
V4_FLASH_LIKE = {  # field values of sglang 0.5.23's DeepSeekV4Config defaults
    "architectures": ["DeepseekV4ForCausalLM"], "hidden_size": 4096, "num_attention_heads": 64,
    "head_dim": 512, "qk_nope_head_dim": 448, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
    "o_groups": 8, "o_lora_rank": 1024, "moe_intermediate_size": 2048, "n_shared_experts": 1,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}


def sglang_split(units: list[Unit], gpus: list[int]) -> list[GpuWork]:
    """SGLang's script: batch sizes dealt round-robin to the GPUs, each GPU tunes every shape."""
    ms = sorted({u.m for u in units})
    per_gpu = []
    for i, gpu in enumerate(gpus):
        mine = set(ms[i::len(gpus)])
        picked = [u for u in units if u.m in mine]
        per_gpu.append(GpuWork(gpu=gpu, units=picked, est_cost=sum(u.cost for u in picked)))
    return per_gpu


def makespan(folder: Path, per_gpu: list[GpuWork], env: dict[str, str]) -> float:
    """Run one job per GPU with these units; seconds from the first launch to the last exit."""
    rendered = render_tuning(folder / "tuning", per_gpu, introspect_script(SCRIPT_DOUBLE), python=sys.executable,
                             device_name="NVIDIA H200")
    jobs = []
    for work in per_gpu:
        shapes: dict[str, list[int]] = {}
        for u in work.units:
            shapes.setdefault(f"{u.n},{u.k}", []).append(u.m)
        jobs.append(FanoutJob(gpu=work.gpu, key=f"tune-gpu{work.gpu}", cwd=str(folder / "tuning"),
                              argv=["bash", str(folder / rendered.scripts[work.gpu])],
                              unit_ids=[u.id for u in work.units], units_by_shape=shapes,
                              env={"DSV4_TUNING_SCRIPT": str(SCRIPT_DOUBLE), **env}))
    result = run_fanout(LocalExecutor(folder / "jobs"), jobs, lambda kind, data: None, poll_s=0.2)
    assert result.ok, [j.reason for j in result.jobs]
    spans = [(json.loads((d / "launch.json").read_text())["launched_at"],
              json.loads((d / "exit.json").read_text())["ended_at"]) for d in (folder / "jobs").iterdir()]
    return max(e for _, e in spans) - min(s for s, _ in spans)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--unit-s", type=float, default=0.6, help="the double's base seconds per unit")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    shapes, _ = derive_from_config(V4_FLASH_LIKE, 8)
    units = make_units(shapes, DEFAULT_BATCH_SIZES)
    env = {"DSV4_DOUBLE_UNIT_S": str(opts.unit_s), "DSV4_DOUBLE_COST": "work"}
    real = [double_unit_seconds(u.m, u.n, u.k, opts.unit_s) for u in units]
    bound = lower_bound(real, opts.gpus)
    gpus = list(range(opts.gpus))
    empty = {**env, "DSV4_DOUBLE_UNIT_S": "0"}
    plans = {"ours": plan_units(units, gpus).per_gpu, "sglang": sglang_split(units, gpus)}
    spans: dict[str, list[float]] = {"ours": [], "sglang": [], "fixed": []}
    for n in range(opts.rounds):
        order = ["ours", "sglang", "fixed"] if n % 2 == 0 else ["fixed", "sglang", "ours"]
        for name in order:
            with tempfile.TemporaryDirectory() as tmp:
                if name == "fixed":  # our jobs, every unit instant: the cost of running jobs at all
                    spans[name].append(makespan(Path(tmp), plans["ours"], empty))
                else:
                    spans[name].append(makespan(Path(tmp), plans[name], env))
    fixed = statistics.median(spans["fixed"])
    ref = f"lower bound {bound:.1f} s + the jobs with instant units {fixed:.2f} s (same rounds)"
    print(f"{len(units)} units ({len(shapes)} shapes x {len(DEFAULT_BATCH_SIZES)} batch sizes) on {opts.gpus} GPUs")
    reached = {name: [m / (bound + f) for m, f in zip(spans[name], spans["fixed"], strict=True)]
               for name in ("ours", "sglang")}
    return finish([
        row("tuning_assignment", f"tuning fan-out on {opts.gpus} GPUs: makespan ÷ (bound + fixed cost)",
            reached["ours"], "x", ref, f"<= {GOAL}", GOAL),
        row("tuning_assignment", "  SGLang's own split, run the same way", reached["sglang"], "x", ref),
        row("tuning_assignment", "  ours ÷ the bare lower bound", [m / bound for m in spans["ours"]], "x",
            f"lower bound {bound:.1f} s"),
        row("tuning_assignment", "  SGLang's split ÷ the bare lower bound", [m / bound for m in spans["sglang"]], "x",
            f"lower bound {bound:.1f} s"),
    ])


if __name__ == "__main__":
    sys.exit(main())
