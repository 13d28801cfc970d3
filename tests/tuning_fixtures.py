"""Shared builders for the tuning tests: a fake SGLang checkout around the tuning-script double."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

DOUBLES = Path(__file__).parent / "doubles"
SCRIPT_DOUBLE = DOUBLES / "tuning_block_wise_kernel.py"
NVIDIA_SMI_DOUBLE = DOUBLES / "nvidia_smi"

# Real SGLang 0.5.23 log lines (format from sglang/kernels/ops/gemm/fp8_kernel.py), with the
# server's usual "[time TPn]" prefix.
CFG = "/usr/lib/python3/site-packages/sglang/kernels/ops/gemm/configs"
DEFAULT_LINE = ("[2026-11-30 10:00:01 TP0] Using default W8A8 Block FP8 kernel config. Performance might be "
                "sub-optimal! Config file not found at " + CFG +
                "/N={n},K={k},device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json")
LOADED_LINE = "[2026-11-30 10:00:01 TP0] Using configuration from {path} for W8A8 Block FP8 kernel."

V4_FLASH_LIKE = {  # field values of sglang 0.5.23's DeepSeekV4Config defaults
    "architectures": ["DeepseekV4ForCausalLM"], "hidden_size": 4096, "num_attention_heads": 64,
    "head_dim": 512, "qk_nope_head_dim": 448, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
    "o_groups": 8, "o_lora_rank": 1024, "moe_intermediate_size": 2048, "n_shared_experts": 1,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}
V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
    "num_attention_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}


def make_checkout(root: Path, existing: dict[str, dict] | None = None) -> Path:
    """A git-checkout-shaped SGLang tree: python/sglang (0.5.23 layout) + the tuning-script double."""
    pkg = root / "python" / "sglang"
    (pkg / "kernels/ops/gemm/configs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels/ops/gemm/fp8_kernel.py").write_text("# stand-in: only its presence is checked\n")
    (pkg / "srt").mkdir()
    (pkg / "srt/environ.py").write_text("class Envs:\n    SGLANG_ENABLE_JIT_DEEPGEMM = EnvBool(True)\n")
    bench = root / "benchmark/kernels/quantization"
    bench.mkdir(parents=True)
    shutil.copy(SCRIPT_DOUBLE, bench / "tuning_block_wise_kernel.py")
    for name, data in (existing or {}).items():
        (pkg / "kernels/ops/gemm/configs" / name).write_text(json.dumps(data, indent=4) + "\n")
    return root


def config_dir(checkout: Path) -> Path:
    return checkout / "python/sglang/kernels/ops/gemm/configs"


def triton_config(m: int) -> dict:
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1 + m % 3,
            "num_warps": 4, "num_stages": 3}
