"""Block-FP8 linear GEMM shapes of a DeepSeek V3/V3.2/V4/V4.1 checkpoint and of the drafter it carries.

Each shape is worked out from the flat config SGLang sees (tools/checkpoint/config.py) and cites
the SGLang model file and line that builds the layer (paths relative to the sglang package, as in
the 0.5.23 wheel). Layers that do not run the block-FP8 linear (dequantized at load, their own
kernel, plain ``nn.Linear``) are named with the reason, never tuned.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from tools.base import ToolError
from tools.checkpoint.config import CheckpointConfig

Drafter = Literal["mtp_head", "dspark"]
V3_ARCHS = {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM"}
V4_ARCHS = {"DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM"}
V4 = "srt/models/deepseek_v4.py"
V2 = "srt/models/deepseek_v2.py"
DSPARK = "srt/models/deepseek_v4_dspark.py"
# SGLang's rule for a bundled DSpark draft: any of these keys on the (flat) target config.
DSPARK_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")
DSPARK_RULE = "srt/speculative/dspark_components/dspark_config.py:162 checkpoint_bundles_dspark_draft"


_V4_NOT_LISTED = (f"; attn.wo_a (own batched GEMM at block [128, 128], else dequantized to bf16 at load: {V4}:280); "
                  "the sparse-attention indexer and compressor projections (not derived here: mine a server log)")
_NOT_LISTED = {"DeepseekV4ForCausalLM": _V4_NOT_LISTED, "DeepseekV41ForCausalLM": _V4_NOT_LISTED,
               "DeepseekV32ForCausalLM": "; the DSA indexer projections (srt/layers/attention/dsa/dsa_indexer.py:344; "
                                         "not derived here: mine a server log)"}


class GemmRow(BaseModel):
    part: str  # "target" | "mtp_head" | "dspark"
    layer: str
    n: int
    k: int
    formula: str
    cite: str  # SGLang file:line that builds the layer


class Derivation(BaseModel):
    rows: list[GemmRow]
    lines: list[str]
    block: tuple[int, int] | None
    no_block_fp8: bool = False


class _Fields:
    """Integer fields of the flat config; a missing one is a one-line cited error with the fix."""

    def __init__(self, config: CheckpointConfig, family: str):
        self.config, self.family = config, family

    def get(self, key: str) -> int:
        value = self.config.flat.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            shown = "is missing" if value is None else f"is {value!r}, not a positive integer"
            raise ToolError(f"{self.config.cite(key)} {shown} in {self.config.path}, and the {self.family} "
                            "GEMM shapes need it: fix the config (a truncated download?) or give --shapes N,K")
        return value


def split(total: int, tp: int, what: str) -> int:
    if total % tp:
        raise ToolError(f"{what} = {total} is not divisible by TP {tp}; pick a TP that divides it")
    return total // tp


def weight_block(config: CheckpointConfig) -> tuple[int, int] | None:
    """The fp8 weight block [n, k], None when the weights are not block-FP8; a cited error when malformed."""
    quant = config.flat.get("quantization_config")
    if not isinstance(quant, dict) or quant.get("quant_method") != "fp8" or quant.get("weight_block_size") is None:
        return None
    block = quant["weight_block_size"]
    if not (isinstance(block, list) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise ToolError(f"{config.cite('quantization_config')}.weight_block_size is {block!r} in {config.path}, "
                        "not two positive integers [block_n, block_k]: fix the config")
    return block[0], block[1]


def _shared_expert_rows(f: _Fields, h: int, tp: int, part: str) -> list[GemmRow]:
    if not f.config.flat.get("n_shared_experts"):
        return []
    shared = f.get("n_shared_experts") * f.get("moe_intermediate_size")
    return [GemmRow(part=part, layer="shared_experts.gate_up_proj (column-parallel, unless fused into the MoE)",
                    n=split(2 * shared, tp, "2*moe_intermediate_size*n_shared_experts"), k=h,
                    formula=f"N = 2*moe_intermediate_size*n_shared_experts/TP = 2*{shared}/{tp}; K = hidden_size",
                    cite=f"{V2}:305 (shared_experts built at {V2}:888)"),
            GemmRow(part=part, layer="shared_experts.down_proj (row-parallel, unless fused into the MoE)",
                    n=h, k=split(shared, tp, "moe_intermediate_size*n_shared_experts"),
                    formula=f"N = hidden_size; K = moe_intermediate_size*n_shared_experts/TP = {shared}/{tp}",
                    cite=f"{V2}:313")]


def _v4_attention(f: _Fields, h: int, tp: int, part: str, fused: bool) -> list[GemmRow]:
    head, heads = f.get("head_dim"), f.get("num_attention_heads")
    q_lora, groups, o_lora = f.get("q_lora_rank"), f.get("o_groups"), f.get("o_lora_rank")
    if fused:
        rows = [GemmRow(part=part, layer="attn.wqkv_a (replicated; wq_a+wkv fused, SGLANG_OPT_FUSE_WQA_WKV default "
                        "on, srt/environ.py:1885)", n=q_lora + head, k=h, cite=f"{V4}:1095",
                        formula=f"N = q_lora_rank + head_dim = {q_lora} + {head}; K = hidden_size")]
    else:
        rows = [GemmRow(part=part, layer="attn.wq_a (replicated, not fused)", n=q_lora, k=h, cite=f"{V4}:1103",
                        formula="N = q_lora_rank; K = hidden_size"),
                GemmRow(part=part, layer="attn.wkv (replicated, not fused)", n=head, k=h, cite=f"{V4}:1110",
                        formula="N = head_dim; K = hidden_size")]
    return rows + [
        GemmRow(part=part, layer="attn.wq_b (column-parallel)", n=split(heads * head, tp, "num_attention_heads*head_dim"),
                k=q_lora, formula=f"N = num_attention_heads*head_dim/TP = {heads}*{head}/{tp}; K = q_lora_rank",
                cite=f"{V4}:1118"),
        GemmRow(part=part, layer="attn.wo_b (row-parallel)", n=h, k=split(groups * o_lora, tp, "o_groups*o_lora_rank"),
                formula=f"N = hidden_size; K = o_groups*o_lora_rank/TP = {groups}*{o_lora}/{tp}", cite=f"{V4}:1158")]


def _v3_attention(f: _Fields, h: int, tp: int) -> list[GemmRow]:
    heads, nope, rope, v = (f.get(key) for key in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim",
                                                    "v_head_dim"))
    kv_lora = f.get("kv_lora_rank")
    if f.config.flat.get("q_lora_rank"):
        q_lora = f.get("q_lora_rank")
        rows = [GemmRow(part="target", layer="attn.fused_qkv_a_proj_with_mqa (replicated)", n=q_lora + kv_lora + rope,
                        k=h, cite=f"{V2}:2070", formula=f"N = q_lora_rank + kv_lora_rank + qk_rope_head_dim = "
                                                        f"{q_lora}+{kv_lora}+{rope}; K = hidden_size"),
                GemmRow(part="target", layer="attn.q_b_proj (column-parallel)", n=split(heads * (nope + rope), tp,
                                                                                        "q_b_proj N"),
                        k=q_lora, cite=f"{V2}:2078",
                        formula=f"N = heads*(qk_nope+qk_rope)/TP = {heads}*{nope + rope}/{tp}; K = q_lora_rank")]
    else:
        rows = [GemmRow(part="target", layer="attn.q_proj (column-parallel)", n=split(heads * (nope + rope), tp, "q_proj N"),
                        k=h, cite=f"{V2}:2087",
                        formula=f"N = heads*(qk_nope+qk_rope)/TP = {heads}*{nope + rope}/{tp}; K = hidden_size"),
                GemmRow(part="target", layer="attn.kv_a_proj_with_mqa (replicated)", n=kv_lora + rope, k=h,
                        cite=f"{V2}:2095", formula=f"N = kv_lora_rank + qk_rope_head_dim = {kv_lora}+{rope}; K = hidden_size")]
    rows += [GemmRow(part="target", layer="attn.kv_b_proj (column-parallel)", n=split(heads * (nope + v), tp, "kv_b_proj N"),
                     k=kv_lora, cite=f"{V2}:2145",
                     formula=f"N = heads*(qk_nope+v_head)/TP = {heads}*{nope + v}/{tp}; K = kv_lora_rank"),
             GemmRow(part="target", layer="attn.o_proj (row-parallel)", n=h, k=split(heads * v, tp, "o_proj K"),
                     cite=f"{V2}:2154", formula=f"N = hidden_size; K = heads*v_head_dim/TP = {heads}*{v}/{tp}")]
    if int(f.config.flat.get("first_k_dense_replace") or 0) > 0:
        inter = f.get("intermediate_size")
        rows += [GemmRow(part="target", layer="dense_mlp.gate_up_proj (column-parallel)", n=split(2 * inter, tp, "2*intermediate_size"),
                         k=h, cite=f"{V2}:305", formula=f"N = 2*intermediate_size/TP = 2*{inter}/{tp}; K = hidden_size"),
                 GemmRow(part="target", layer="dense_mlp.down_proj (row-parallel)", n=h, k=split(inter, tp, "intermediate_size"),
                         cite=f"{V2}:313", formula=f"N = hidden_size; K = intermediate_size/TP = {inter}/{tp}")]
    return rows


def bundles_dspark(config: CheckpointConfig) -> list[str]:
    """The dspark_* keys that make SGLang treat the checkpoint as DSpark-bundled (empty: none)."""
    return [key for key in DSPARK_KEYS if config.flat.get(key) is not None]


def choose_drafters(config: CheckpointConfig, v4: bool, asked: list[Drafter] | None) -> tuple[list[Drafter], str]:
    """The drafters whose GEMMs are listed, and the line saying why."""
    keys = bundles_dspark(config)
    nextn = config.flat.get("num_nextn_predict_layers")
    if asked is not None:
        if "dspark" in asked and not (v4 and keys):
            raise ToolError(f"drafter 'dspark' asked for, but {config.path} bundles no DSpark draft (no dspark_* key "
                            f"on a DeepSeek-V4 config; SGLang's rule: {DSPARK_RULE}): drop it or point "
                            "--model-path at a DSpark checkpoint")
        return list(dict.fromkeys(asked)), f"drafter GEMMs: {', '.join(asked) or 'none'} (as asked)"
    if keys:
        cites = ", ".join(config.cite(k) for k in keys)
        if not v4:
            return [], f"drafter: the config has {cites} but DSpark drafts exist for DeepSeek-V4 only: none listed"
        return ["dspark"], f"drafter: bundled DSpark ({cites}; SGLang's rule: {DSPARK_RULE})"
    if isinstance(nextn, int) and not isinstance(nextn, bool) and nextn > 0:
        return ["mtp_head"], (f"drafter: MTP head, presumed from {config.cite('num_nextn_predict_layers')} = {nextn} "
                              "(tensor names not read)")
    return [], "drafter: none (no dspark_* key, no num_nextn_predict_layers)"


def _mtp_rows(f: _Fields, h: int, v4: bool) -> tuple[list[GemmRow], list[str]]:
    if not v4:
        return [], ["  mtp_head eh_proj: left out, a plain bf16 nn.Linear for an fp8 checkpoint "
                    "(srt/models/deepseek_nextn.py:102); its decoder layer has the target's attention and "
                    "shared-expert shapes"]
    nextn = "srt/models/deepseek_v4_nextn.py"
    rows = [GemmRow(part="mtp_head", layer=f"{name} (replicated)", n=h, k=h, cite=f"{nextn}:{line}",
                    formula="N = hidden_size; K = hidden_size") for name, line in (("e_proj", 87), ("h_proj", 94))]
    return rows, ["  mtp_head decoder layer: the target's attention and shared-expert shapes "
                  f"({nextn}:111 builds a DeepseekV4DecoderLayer)"]


def _dspark_rows(f: _Fields, h: int, tp: int) -> tuple[list[GemmRow], list[str]]:
    layers = f.config.flat.get("dspark_target_layer_ids")
    if isinstance(layers, list) and layers:
        count, how = len(layers), f"len(dspark_target_layer_ids) ({f.config.cite('dspark_target_layer_ids')})"
    else:  # SGLang falls back to every target layer (deepseek_v4_dspark.py:749)
        count = f.get("num_hidden_layers")
        how = "num_hidden_layers (no dspark_target_layer_ids)"
    rows = [GemmRow(part="dspark", layer="stages.0.main_proj (replicated)", n=h, k=h * count, cite=f"{DSPARK}:615",
                    formula=f"N = hidden_size; K = hidden_size*{how} = {h}*{count}")]
    rows += _v4_attention(f, h, tp, "dspark", fused=False) + _shared_expert_rows(f, h, tp, "dspark")
    return rows, [f"  dspark stages: {count} ({DSPARK}:739); attention unfused (fuse_wqa_wkv=False, {DSPARK}:115); "
                  f"wo_a left out: bf16, dequantized at load ({DSPARK}:116, {DSPARK}:1022); markov_w2 and the "
                  f"confidence head left out: plain nn.Linear ({DSPARK}:431)"]


def _row_lines(rows: list[GemmRow], seen: set[tuple[int, int]]) -> list[str]:
    return [f"  {row.part} {row.layer}: {row.formula} -> N={row.n}, K={row.k}"
            + (" (a target shape too)" if (row.n, row.k) in seen else "") + f"  [{row.cite}]" for row in rows]


def derive(config: CheckpointConfig, tp: int, drafters: list[Drafter] | None = None) -> Derivation:
    """The block-FP8 linear GEMMs of the target model and its drafter under TP, with the derivation."""
    if tp < 1:
        raise ToolError(f"TP must be >= 1, got {tp}")
    arch = config.architecture
    if arch not in V3_ARCHS | V4_ARCHS:
        return Derivation(rows=[], block=None, lines=[
            f"architecture {arch or '?'} ({config.cite('architectures')}) has no shape derivation here; "
            "give --shapes N,K or mine a server log"])
    v4 = arch in V4_ARCHS
    block = weight_block(config)
    if block is None:
        return Derivation(rows=[], block=None, no_block_fp8=True, lines=[
            f"{config.cite('quantization_config')} has no fp8 weight_block_size: the block-FP8 GEMM is not used"])
    f = _Fields(config, "DeepSeek V4" if v4 else "DeepSeek V3")
    h = f.get("hidden_size")
    rows = (_v4_attention(f, h, tp, "target", fused=True) if v4 else _v3_attention(f, h, tp))
    rows += _shared_expert_rows(f, h, tp, "target")
    block_cite = f"{config.cite('quantization_config')}.weight_block_size"
    lines = [f"{f.family} family ({arch}), TP={tp} (attention TP; with DP attention it is TP/DP), "
             f"block {list(block)} ({block_cite}), hidden_size={h} ({config.cite('hidden_size')}):"]
    lines += _row_lines(rows, set())
    chosen, why = choose_drafters(config, v4, drafters)
    lines.append(f"  {why}")
    for drafter in chosen:
        extra, said = _mtp_rows(f, h, v4) if drafter == "mtp_head" else _dspark_rows(f, h, tp)
        lines += _row_lines(extra, {(row.n, row.k) for row in rows}) + said
        rows += extra
    lines.append("  not listed: routed experts (fused-MoE kernel, tuned separately)" + _NOT_LISTED.get(arch, ""))
    return Derivation(rows=rows, lines=lines, block=block)
