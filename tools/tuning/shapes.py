"""Which (N, K) GEMM shapes to tune, and where each one came from.

Sources, in order: the user (``--shapes N,K``), SGLang's own warning in a server log (it names
the exact file it looked for), the model's ``config.json`` for DeepSeek V3/V4 families under a
tensor-parallel size (with the derivation written out), else nothing (the caller may boot a
discovery server and mine its log).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.tuning.configs import parse_config_file_name


class Shape(BaseModel):
    n: int = Field(gt=0, description="Output features of the GEMM (rows of the weight)")
    k: int = Field(gt=0, description="Input features (columns of the weight)")
    block_n: int = 128
    block_k: int = 128
    source: str = Field(description="user | log:<file> | config.json:<layer> ...")
    why: str = Field("", description="The derivation or the log line this shape came from")

    @property
    def key(self) -> str:
        return f"{self.n},{self.k}"


def parse_user_shapes(items: list[str], block_n: int = 128, block_k: int = 128) -> list[Shape]:
    shapes = []
    for item in items:
        parts = [p.strip() for p in item.replace("x", ",").split(",")]
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ToolError(f"shape {item!r} is not 'N,K' with two positive integers; "
                            "write e.g. --shapes 4096,7168 --shapes 7168,2048")
        shapes.append(Shape(n=int(parts[0]), k=int(parts[1]), block_n=block_n, block_k=block_k,
                            source="user", why="given with --shapes"))
    return _unique(shapes)


# SGLang: "Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file
# not found at <path>" (the path holds a space inside "block_shape=[128, 128]").
_DEFAULT_USED = re.compile(r"Using default W8A8 Block FP8 kernel config\..*?Config file not found at (?P<path>.+?\.json)")


def mine_log(text: str, source: str) -> tuple[list[Shape], str]:
    """Shapes SGLang ran with default configs, from its warnings; plus the device name seen."""
    shapes: list[Shape] = []
    device = ""
    for line in text.splitlines():
        match = _DEFAULT_USED.search(line)
        if match is None:
            continue
        parsed = parse_config_file_name(match["path"])
        if parsed is None or not parsed["dtype"].startswith("fp8"):
            continue
        device = device or parsed["device_name"]
        shapes.append(Shape(n=parsed["n"], k=parsed["k"], block_n=parsed["block_n"], block_k=parsed["block_k"],
                            source=f"log:{source}", why=f"SGLang used the default config: no {Path(match['path']).name}"))
    return _unique(shapes), device


def _unique(shapes: list[Shape]) -> list[Shape]:
    seen: dict[tuple, Shape] = {}
    for shape in shapes:
        seen.setdefault((shape.n, shape.k, shape.block_n, shape.block_k), shape)
    return list(seen.values())


# -- config.json derivation ----------------------------------------------------------------------
V3_ARCHS = {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM"}
V4_ARCHS = {"DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM"}


def _block(config: dict) -> tuple[int, int] | None:
    quant = config.get("quantization_config") or {}
    block = quant.get("weight_block_size")
    if quant.get("quant_method") not in (None, "fp8") or not block or len(block) != 2:
        return None
    return int(block[0]), int(block[1])


def _split(total: int, tp: int, what: str) -> int:
    if total % tp:
        raise ToolError(f"{what} = {total} is not divisible by TP {tp}; pick a TP that divides it")
    return total // tp


Row = tuple[str, int, int, str]  # (layer, N, K, formula)


def _v4_rows(config: dict, h: int, tp: int) -> list[Row]:
    head = int(config.get("head_dim") or config["qk_nope_head_dim"] + config["qk_rope_head_dim"])
    heads, q_lora = int(config["num_attention_heads"]), int(config["q_lora_rank"])
    groups, o_lora = int(config["o_groups"]), int(config["o_lora_rank"])
    return [
        ("attn.wqkv_a (replicated; fused wq_a+wkv, SGLANG_OPT_FUSE_WQA_WKV default on)", q_lora + head, h,
         f"N = q_lora_rank + head_dim = {q_lora} + {head}; K = hidden_size"),
        ("attn.wq_b (column-parallel)", _split(heads * head, tp, "num_attention_heads*head_dim"), q_lora,
         f"N = num_attention_heads*head_dim/TP = {heads}*{head}/{tp}; K = q_lora_rank"),
        ("attn.wo_b (row-parallel)", h, _split(groups * o_lora, tp, "o_groups*o_lora_rank"),
         f"N = hidden_size; K = o_groups*o_lora_rank/TP = {groups}*{o_lora}/{tp}"),
    ]


def _v3_rows(config: dict, h: int, tp: int) -> list[Row]:
    heads = int(config["num_attention_heads"])
    nope, rope, v = int(config["qk_nope_head_dim"]), int(config["qk_rope_head_dim"]), int(config["v_head_dim"])
    kv_lora = int(config["kv_lora_rank"])
    q_lora = config.get("q_lora_rank")
    rows: list[Row]
    if q_lora:
        rows = [("attn.fused_qkv_a_proj_with_mqa (replicated)", int(q_lora) + kv_lora + rope, h,
                 f"N = q_lora_rank + kv_lora_rank + qk_rope_head_dim = {q_lora}+{kv_lora}+{rope}; K = hidden_size"),
                ("attn.q_b_proj (column-parallel)", _split(heads * (nope + rope), tp, "q_b_proj N"), int(q_lora),
                 f"N = heads*(qk_nope+qk_rope)/TP = {heads}*{nope + rope}/{tp}; K = q_lora_rank")]
    else:
        rows = [("attn.q_proj (column-parallel)", _split(heads * (nope + rope), tp, "q_proj N"), h,
                 f"N = heads*(qk_nope+qk_rope)/TP = {heads}*{nope + rope}/{tp}; K = hidden_size"),
                ("attn.kv_a_proj_with_mqa (replicated)", kv_lora + rope, h,
                 f"N = kv_lora_rank + qk_rope_head_dim = {kv_lora}+{rope}; K = hidden_size")]
    rows += [("attn.kv_b_proj (column-parallel)", _split(heads * (nope + v), tp, "kv_b_proj N"), kv_lora,
              f"N = heads*(qk_nope+v_head)/TP = {heads}*{nope + v}/{tp}; K = kv_lora_rank"),
             ("attn.o_proj (row-parallel)", h, _split(heads * v, tp, "o_proj K"),
              f"N = hidden_size; K = heads*v_head_dim/TP = {heads}*{v}/{tp}")]
    if int(config.get("first_k_dense_replace") or 0) > 0:
        inter = int(config["intermediate_size"])
        rows += [("dense mlp.gate_up_proj", _split(2 * inter, tp, "2*intermediate_size"), h,
                  f"N = 2*intermediate_size/TP = 2*{inter}/{tp}; K = hidden_size"),
                 ("dense mlp.down_proj", h, _split(inter, tp, "intermediate_size"),
                  f"N = hidden_size; K = intermediate_size/TP = {inter}/{tp}")]
    return rows


def _shared_expert_rows(config: dict, h: int, tp: int) -> list[Row]:
    shared = int(config.get("n_shared_experts") or 0) * int(config.get("moe_intermediate_size") or 0)
    if not shared:
        return []
    return [("shared_experts.gate_up_proj (unless fused into the MoE)", _split(2 * shared, tp, "2*shared"), h,
             f"N = 2*moe_intermediate_size*n_shared_experts/TP = 2*{shared}/{tp}; K = hidden_size"),
            ("shared_experts.down_proj (unless fused into the MoE)", h, _split(shared, tp, "shared"),
             f"N = hidden_size; K = moe_intermediate_size*n_shared_experts/TP = {shared}/{tp}")]


def derive_from_config(config: dict, tp: int) -> tuple[list[Shape], list[str]]:
    """Dense block-FP8 linear shapes of a DeepSeek V3/V4 model under TP, with the derivation.

    Only layers that go through the block-FP8 linear method are listed: routed experts are
    fused-MoE kernels (tuned separately) and V4's ``wo_a`` runs its own batched GEMM.
    """
    if tp < 1:
        raise ToolError(f"TP must be >= 1, got {tp}")
    archs = set(config.get("architectures") or [])
    block = _block(config)
    if not archs & (V3_ARCHS | V4_ARCHS):
        return [], [f"architecture {sorted(archs) or '?'} has no shape derivation here; "
                    "give --shapes N,K or mine a server log"]
    if block is None:
        return [], ["quantization_config has no fp8 weight_block_size: the block-FP8 GEMM is not used"]
    h = int(config["hidden_size"])
    v4 = bool(archs & V4_ARCHS)
    rows = (_v4_rows if v4 else _v3_rows)(config, h, tp) + _shared_expert_rows(config, h, tp)
    lines = [f"{'DeepSeek V4' if v4 else 'DeepSeek V3'} family, TP={tp}, block {list(block)}, hidden_size={h}:"]
    shapes = []
    for layer, n, k, formula in rows:
        lines.append(f"  {layer}: {formula} -> N={n}, K={k}")
        shapes.append(Shape(n=n, k=k, block_n=block[0], block_k=block[1], source=f"config.json:{layer.split(' ')[0]}",
                            why=formula))
    lines.append("  not listed: routed experts (fused-MoE kernel, tuned separately)"
                 + ("; attn.wo_a (own batched GEMM)" if v4 else ""))
    return _unique(shapes), lines


def read_model_config(model_path: str | Path) -> dict:
    path = Path(model_path)
    path = path / "config.json" if path.is_dir() else path
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ToolError(f"no config.json at {path}; pass --model-path to the local checkpoint folder") from None
    except json.JSONDecodeError as err:
        raise ToolError(f"{path} is not valid JSON ({err.msg}); check the checkpoint download") from None


class FindShapesArgs(BaseModel):
    """Find the FP8 block-GEMM (N,K) shapes worth tuning: from the user, a server log, or config.json."""

    shapes: list[str] = Field(default_factory=list, description="User shapes 'N,K' (highest priority)")
    log_files: list[str] = Field(default_factory=list, description="Server logs to mine for default-config warnings")
    model_path: str | None = Field(None, description="Checkpoint folder or config.json to derive shapes from")
    tp: int = Field(1, description="Tensor-parallel size the server runs with")


class FindShapesResult(BaseModel):
    shapes: list[Shape]
    derivation: list[str] = Field(default_factory=list)
    device_name: str = Field("", description="GPU name seen in a mined log, if any")
    note: str = ""
    no_block_fp8: bool = Field(False, description="The model's config.json has no block-FP8 weights: no source "
                                                  "(not even a discovery boot) will find shapes")


def find_shapes(args: FindShapesArgs) -> FindShapesResult:
    if args.shapes:
        return FindShapesResult(shapes=parse_user_shapes(args.shapes), note="shapes given by the user")
    mined: list[Shape] = []
    device = ""
    for log in args.log_files:
        try:
            text = Path(log).read_text(errors="replace")
        except FileNotFoundError:
            raise ToolError(f"log file {log} does not exist; check the path") from None
        found, seen = mine_log(text, Path(log).name)
        mined += found
        device = device or seen
    if mined:
        return FindShapesResult(shapes=_unique(mined), device_name=device,
                                note=f"{len(mined)} shapes from SGLang default-config warnings")
    if args.model_path:
        config = read_model_config(args.model_path)
        shapes, lines = derive_from_config(config, args.tp)
        return FindShapesResult(shapes=shapes, derivation=lines, note=lines[0] if not shapes else "derived from config.json",
                                no_block_fp8=not shapes and _block(config) is None)
    return FindShapesResult(shapes=[], note="no --shapes, no server log with default-config warnings, no model "
                                           "config.json: a discovery boot of the server on the GPU host finds them")


FIND_SHAPES = Tool(name="find_tuning_shapes", args=FindShapesArgs, run=find_shapes)
