"""SGLang's FP8 block-GEMM config folder and its file names.

SGLang reads tuned configs only from the ``configs/`` folder next to the kernel module
(0.5.23: ``sglang/kernels/ops/gemm/configs/``; older: ``sglang/srt/layers/quantization/configs/``);
there is no environment override, so installing means writing into that folder.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.child_env import child_env
from tools.source.layout import find_package

# Relative to the folder that contains the ``sglang`` package, newest layout first.
CONFIG_DIR_CANDIDATES = (
    "sglang/kernels/ops/gemm/configs",
    "sglang/srt/layers/quantization/configs",
)
# The kernel module that reads each folder: the folder only counts when that module is there.
_KERNEL_MODULE = {
    "sglang/kernels/ops/gemm/configs": "sglang/kernels/ops/gemm/fp8_kernel.py",
    "sglang/srt/layers/quantization/configs": "sglang/srt/layers/quantization/fp8_kernel.py",
}
TRITON_CONFIG_FIELDS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
_FILE_NAME = re.compile(
    r"N=(?P<n>\d+),K=(?P<k>\d+),device_name=(?P<device>[^,]+),dtype=(?P<dtype>[A-Za-z0-9_]+),"
    r"block_shape=\[(?P<bn>\d+), ?(?P<bk>\d+)\]\.json$"
)


def config_file_name(n: int, k: int, device_name: str, block_n: int = 128, block_k: int = 128,
                     dtype: str = "fp8_w8a8") -> str:
    """The exact name SGLang looks for (device spaces become '_', one space after the comma)."""
    device = device_name.replace(" ", "_")
    return f"N={n},K={k},device_name={device},dtype={dtype},block_shape=[{block_n}, {block_k}].json"


def parse_config_file_name(name: str) -> dict | None:
    """N, K, device, dtype, block_n, block_k from a config file name (or path); None if not one."""
    match = _FILE_NAME.search(name)
    if match is None:
        return None
    return {"n": int(match["n"]), "k": int(match["k"]), "device_name": match["device"],
            "dtype": match["dtype"], "block_n": int(match["bn"]), "block_k": int(match["bk"])}


def package_parent(sglang_root: Path) -> Path:
    """The folder holding ``sglang/``: the root itself (wheel, site-packages) or ``python/`` (checkout)."""
    package = find_package(sglang_root)
    if package is not None:
        return package.parent
    root = Path(sglang_root)
    raise ToolError(f"{root} holds no sglang package (looked for sglang/__init__.py in it, python/ and "
                    "its parent); pass --sglang-src PATH to a checkout or an installed sglang")


def find_config_dir(sglang_root: Path) -> Path:
    """The config folder this SGLang version reads, detected by which kernel module exists."""
    base = package_parent(sglang_root)
    for relative in CONFIG_DIR_CANDIDATES:
        if (base / _KERNEL_MODULE[relative]).exists():
            return base / relative
    raise ToolError(f"no FP8 kernel module under {base} (looked for "
                    f"{', '.join(_KERNEL_MODULE.values())}); this SGLang version is not supported "
                    "by the tuning step: pass --sglang-src PATH to a newer checkout")


def validate_config_map(data: object, where: str) -> dict[int, dict]:
    """Check a tuned map: integer M keys, each value a Triton config with integer fields."""
    if not isinstance(data, dict) or not data:
        raise ToolError(f"{where}: expected a non-empty JSON object mapping M to a Triton config; "
                        "delete the file and re-run the tuning of this shape")
    checked: dict[int, dict] = {}
    for key, config in data.items():
        try:
            m = int(key)
        except (TypeError, ValueError):
            raise ToolError(f"{where}: key {key!r} is not an integer batch size M; the file is not a "
                            "block-FP8 config: delete it and re-run the tuning of this shape") from None
        if not isinstance(config, dict):
            raise ToolError(f"{where}: M={m} maps to {type(config).__name__}, not a Triton config object")
        missing = [f for f in TRITON_CONFIG_FIELDS if f not in config]
        wrong = [f for f in TRITON_CONFIG_FIELDS if f in config and (not isinstance(config[f], int)
                                                                   or isinstance(config[f], bool)
                                                                   or config[f] <= 0)]
        if missing or wrong:
            detail = f"missing {missing}" if missing else f"non-positive or non-integer {wrong}"
            raise ToolError(f"{where}: M={m} config {detail}; re-run the tuning of this shape")
        checked[m] = config
    return checked


def read_config_file(path: Path) -> dict[int, dict]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    except json.JSONDecodeError as err:
        raise ToolError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); the tuning process "
                        "was probably killed while writing it: delete it and re-run that shape") from None
    return validate_config_map(data, str(path))


class LookupConfigsArgs(BaseModel):
    """Look up which FP8 block-GEMM shapes already have tuned configs for a GPU in an SGLang source tree."""

    sglang_root: str = Field(description="SGLang checkout, installed package folder or unpacked wheel")
    device_name: str = Field(description="GPU name as nvidia-smi prints it, e.g. 'NVIDIA H200'")
    shapes: list[str] = Field(description="Shapes 'N,K' to look up")
    block_n: int = Field(128, description="Weight block size along N")
    block_k: int = Field(128, description="Weight block size along K")


class LookupConfigsResult(BaseModel):
    config_dir: str
    existing: dict[str, str] = Field(description="'N,K' -> file that exists")
    missing: list[str] = Field(description="'N,K' shapes with no config for this GPU")


def lookup_configs(args: LookupConfigsArgs) -> LookupConfigsResult:
    folder = find_config_dir(Path(args.sglang_root))
    existing: dict[str, str] = {}
    missing: list[str] = []
    for text in args.shapes:
        n, k = (int(p) for p in text.split(","))
        path = folder / config_file_name(n, k, args.device_name, args.block_n, args.block_k)
        if path.exists():
            existing[f"{n},{k}"] = str(path)
        else:
            missing.append(f"{n},{k}")
    return LookupConfigsResult(config_dir=str(folder), existing=existing, missing=missing)


LOOKUP_CONFIGS = Tool(name="lookup_fp8_block_configs", args=LookupConfigsArgs, run=lookup_configs)


def installed_package_parent(python: str, timeout_s: float = 60.0) -> Path | None:
    """Where ``python`` imports sglang from (the folder holding ``sglang/``), found without importing
    sglang itself (that would pull in torch); None when that interpreter has no sglang."""
    import shutil
    import subprocess

    binary = shutil.which(python)
    if binary is None:
        return None
    probe = ("import importlib.util as u; s = u.find_spec('sglang'); "
             "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")
    try:
        done = subprocess.run([binary, "-c", probe], capture_output=True, text=True, timeout=timeout_s,
                              env=child_env())
    except subprocess.TimeoutExpired:
        return None
    location = done.stdout.strip()
    return Path(location).parent if done.returncode == 0 and location else None
