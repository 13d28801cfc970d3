"""Real-GPU check that a [32, 32] block-FP8 checkpoint (DeepSeek-V4.1-Flash) is tunable: SGLang's own
Triton kernel over the agent's search space at block 32, beside SGLang's default config.

Nothing is reimplemented: the kernel is ``_w8a8_block_fp8_matmul`` read from SGLang's
``kernels/ops/gemm/fp8_kernel.py`` (``--kernel-file``), the candidate grid is the real tuning script's
``get_configs_compute_bound`` (``--script``, the upstream corpus copy), and the filter that turns the grid
into candidates for a block is the agent's driver's ``search_space`` (tools/tuning/driver_template.py).
Every timed config is checked against a float32 reference first. For each (N, K, M): SGLang's default
config for the block (what the server runs without a tuned table) and the best candidate of an evenly
spaced sample of the space. Needs torch and triton only.

    python benchmarks/gpu_block32_tuning.py [--kernel-file fp8_kernel.py] [--script tuning_block_wise_kernel.py]

Exits 1 when the space is empty at block 32, a candidate computes a wrong result, or the best candidate is
slower than SGLang's default; 2 without a CUDA GPU with FP8.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.tuning.driver_template import DRIVER_TEMPLATE  # noqa: E402

# V4.1-Flash at TP 8 (`dsv4-agent tuning shapes --model-path .../DeepSeek-V4.1-Flash --tp 8`): DSpark's
# main_proj and a dense attention projection.
SHAPES = [(5120, 15360), (4096, 1024)]
MS = [1, 16, 64, 256]
BLOCK = 32


def _function_source(path: Path, name: str) -> str:
    text = path.read_text()
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == name)
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return "\n".join(text.splitlines()[first - 1:node.end_lineno])


def _driver_search_space():
    source = DRIVER_TEMPLATE.split("def search_space", 1)[1].split("\ndef ", 1)[0]
    namespace: dict = {}
    exec("def search_space" + source, namespace)  # the driver's own function, as it runs on the GPU host
    return namespace["search_space"]


def _wheel_kernel() -> Path:
    from tools.defaults import SGLANG_VERSION
    from tools.source.resolve import ensure_wheel_source

    return ensure_wheel_source(SGLANG_VERSION) / "sglang" / "kernels" / "ops" / "gemm" / "fp8_kernel.py"


def _corpus_script() -> Path:
    here = Path(__file__).resolve().parents[1]
    for folder in (here, *here.parents):
        found = folder / "shared" / "corpus" / "sglang-upstream" / "benchmark" / "kernels" / "quantization"
        if (found / "tuning_block_wise_kernel.py").is_file():
            return found / "tuning_block_wise_kernel.py"
    raise SystemExit("no shared/corpus next to the repository: pass --script tuning_block_wise_kernel.py")


def _load(kernel_file: Path, script: Path):
    # Triton compiles a @jit function from its file: the kernel's own text goes into a module of its own.
    module_file = Path(tempfile.mkdtemp(prefix="sglang-kernel-")) / "sglang_block_fp8_kernel.py"
    module_file.write_text("import torch\nimport triton\nimport triton.language as tl\n\n\n"
                           + _function_source(kernel_file, "_w8a8_block_fp8_matmul") + "\n")
    spec = importlib.util.spec_from_file_location(module_file.stem, module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    grid_ns = {"_is_hip": False}
    exec(_function_source(script, "get_configs_compute_bound"), grid_ns)

    class Script:  # what the driver reads from the tuning script
        get_configs_compute_bound = staticmethod(grid_ns["get_configs_compute_bound"])

    return module._w8a8_block_fp8_matmul, Script


def _inputs(m: int, n: int, k: int):
    import torch

    torch.manual_seed(0)
    a = (torch.randn(m, k, device="cuda") / 4).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") / 4).to(torch.float8_e4m3fn)
    a_s = torch.rand(m, k // BLOCK, device="cuda") + 0.5
    b_s = torch.rand(n // BLOCK, k // BLOCK, device="cuda") + 0.5
    ref = (a.float() * a_s.repeat_interleave(BLOCK, 1)) @ (b.float() * b_s.repeat_interleave(BLOCK, 0)
                                                            .repeat_interleave(BLOCK, 1)).T
    return a, b, a_s, b_s, ref


def _run(kernel, config: dict, a, b, a_s, b_s, out):
    import triton

    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)
    kernel[grid](a, b, out, a_s, b_s, m, n, k, BLOCK, BLOCK, a.stride(-2), a.stride(-1), b.stride(1), b.stride(0),
                 out.stride(-2), out.stride(-1), a_s.stride(-2), a_s.stride(-1), b_s.stride(1), b_s.stride(0),
                 **config, needs_masking=bool(k % config["BLOCK_SIZE_K"]))


def _time(kernel, config, tensors, out) -> float | None:
    """Median microseconds, or None when the config does not fit this GPU (shared memory)."""
    import torch
    import triton

    a, b, a_s, b_s, ref = tensors
    try:
        _run(kernel, config, a, b, a_s, b_s, out)
        torch.cuda.synchronize()
    except triton.runtime.errors.OutOfResources:
        return None
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    if error > 2e-2:
        raise SystemExit(f"config {config} computes a wrong result (relative error {error:.3g})")
    ms = triton.testing.do_bench(lambda: _run(kernel, config, a, b, a_s, b_s, out), warmup=5, rep=20)
    return ms * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-file", type=Path, help="SGLang's kernels/ops/gemm/fp8_kernel.py "
                        "(default: the sglang wheel's, as the agent caches it)")
    parser.add_argument("--script", type=Path, help="SGLang's tuning_block_wise_kernel.py (default: the upstream "
                        "corpus copy in shared/corpus next to the repository)")
    parser.add_argument("--sample", type=int, default=40, help="Candidates timed per shape (evenly spaced)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        print("needs a CUDA GPU with FP8 (compute capability 8.9 or later)", file=sys.stderr)
        return 2
    kernel, script = _load(args.kernel_file or _wheel_kernel(), args.script or _corpus_script())
    space = _driver_search_space()(script, BLOCK)
    raw = script.get_configs_compute_bound()
    print(f"device {torch.cuda.get_device_name()}; the script's grid: {len(raw)} configs, "
          f"{sum(1 for c in raw if BLOCK % c['BLOCK_SIZE_K'] == 0)} fit block {BLOCK} as written; "
          f"the driver's space at block {BLOCK}: {len(space)}")
    if not space or any(BLOCK % c["BLOCK_SIZE_K"] for c in space):
        print(f"FAIL: no candidate whose BLOCK_SIZE_K divides {BLOCK}")
        return 1
    default = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": BLOCK, "BLOCK_SIZE_K": BLOCK, "GROUP_SIZE_M": 32,
               "num_warps": 4, "num_stages": 3}  # SGLang's config for a block when no table is found
    sample = space[::max(1, len(space) // args.sample)]
    rows, speedups = [], []
    for n, k in SHAPES:
        for m in MS:
            tensors = _inputs(m, n, k)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            base = _time(kernel, default, tensors, out)
            timed = [(t, c) for c in sample if (t := _time(kernel, c, tensors, out)) is not None]
            best_us, best = min(timed, key=lambda x: x[0])
            speedups.append(base / best_us)
            rows.append({"N": n, "K": k, "M": m, "default_us": round(base, 2), "best_us": round(best_us, 2),
                         "speedup": round(base / best_us, 3), "timed": len(timed), "best": best})
            print(f"N={n} K={k} M={m}: default {base:.1f} us, best of {len(timed)} {best_us:.1f} us "
                  f"({base / best_us:.2f}x) {json.dumps(best)}")
    print(f"speedup over SGLang's default at block {BLOCK}: median {statistics.median(speedups):.2f}x, "
          f"range {min(speedups):.2f}-{max(speedups):.2f}x over {len(speedups)} points")
    slower = [r for r in rows if r["speedup"] < 1.0]
    if slower:
        print(f"FAIL: the best candidate is slower than SGLang's default at {len(slower)} points")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
