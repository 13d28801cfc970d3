"""The agent on the doubles, set up for a benchmark: no pytest, no test-session variables.

The doubles are programs in tests/doubles/ (each file says what it stands in for): ``nvidia-smi``
(N fake GPUs), SGLang's tuning script (sleeps, writes the real config format), the interpreter
that has SGLang (``sglang_python``: the server double, SGLang's real bench client from the wheel)
and a local tokenizer. A benchmark runs them as programs, the way the agent does; it imports
nothing from tests/. What is real: the agent, the SGLang 0.5.23 package from the wheel, the jobs.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOUBLES = REPO / "tests" / "doubles"
SCRIPT_DOUBLE = DOUBLES / "tuning_block_wise_kernel.py"
MODEL = "deepseek-ai/DeepSeek-V4-Flash"
GPU_NAME = "NVIDIA A100-SXM4-80GB"  # no DeepGEMM before Hopper: the Triton path is engaged
SHAPES = ["512,1024", "1024,512"]


def package_copy(wheel_root: Path, dest: Path) -> Path:
    """A real copy of the wheel's ``sglang/`` package, made once per benchmark: each campaign's
    checkout hard-links it (tuning installs by renaming new files in, so the copy never changes
    and the wheel cache is never linked)."""
    shutil.copytree(wheel_root / "sglang", dest, symlinks=True)
    return dest


def make_checkout(root: Path, package: Path) -> Path:
    """A checkout-shaped tree under ``root``: the package under python/, the tuning-script double
    where SGLang keeps the script."""
    checkout = root / "sglang-checkout"
    shutil.copytree(package, checkout / "python" / "sglang", symlinks=True, copy_function=os.link)
    bench = checkout / "benchmark/kernels/quantization"
    bench.mkdir(parents=True)
    shutil.copy(SCRIPT_DOUBLE, bench / SCRIPT_DOUBLE.name)
    return checkout


def build_tokenizer(dest: Path) -> Path:
    """The tokenizer double's folder, written by its own program."""
    subprocess.run([sys.executable, str(DOUBLES / "tokenizer.py"), str(dest)], check=True, capture_output=True)
    return dest


def campaign_env(root: Path, gpus: int = 2, unit_s: float = 0.3) -> dict[str, str]:
    """PATH with the nvidia-smi double first, and the doubles' knobs (the real interpreter the
    ``sglang_python`` double runs SGLang's bench client with is this one)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    if not smi.exists():
        smi.symlink_to(DOUBLES / "nvidia_smi")
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "DSV4_DOUBLE_REAL_PYTHON": sys.executable,
        "DSV4_FAKE_GPUS": str(gpus), "DSV4_FAKE_GPU_NAME": GPU_NAME, "DSV4_DOUBLE_DEVICE_NAME": GPU_NAME,
        "DSV4_DOUBLE_UNIT_S": str(unit_s), "DSV4_DOUBLE_CALLS": str(root / "tune_calls.txt"),
    }


def campaign_args(root: Path, package: Path, goal: str = "enable MTP and tune kernels") -> list[str]:
    """The campaign's argv (checkout and tokenizer built under ``root`` first): one concurrency level,
    tiny prompts, both tuning shapes."""
    checkout = make_checkout(root, package)
    tok = build_tokenizer(root / "tok")
    args = [goal, "--sglang", str(checkout), "--sglang-python", str(DOUBLES / "sglang_python"),
            "--model", MODEL, "--model-path", str(tok), "--tokenizer", str(tok),
            "--concurrency", "1", "--input-len", "8", "--output-len", "16", "--prompts-per-concurrency", "2",
            "--min-prompts", "2", "--repeats", "1"]
    for shape in SHAPES:
        args += ["--shapes", shape]
    return args


def double_unit_seconds(m: int, n: int, k: int, base_s: float, cost: str = "work") -> float:
    """Seconds the tuning-script double spends on one (M, N, K) unit: its law (``unit_seconds`` in
    tests/doubles/tuning_block_wise_kernel.py; tests/test_benchmarks.py holds the two equal)."""
    if cost == "work":
        return base_s * (0.6 + 0.4 * max(m, 64) * n * k / 2 ** 31)
    return base_s
