"""``read_checkpoint``: the checkpoint in hand as typed, cited facts (a tool; no weights are read).

A drafter is decided from the tensor names when the index is there (the modules SGLang's draft class
builds must all be present), never from ``num_nextn_predict_layers`` alone: DeepSeek-V4-Flash-0731
keeps that key at 1 while its ``mtp.*`` tensors are a DSpark drafter. Without an index, a DSpark
drafter is decided by SGLang's own rule on the config keys, and an MTP head is presumed only for a
checkpoint that does not bundle DSpark; on a DSpark-bundled checkpoint it stays undecided.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool
from tools.checkpoint.config import CheckpointConfig, read_config
from tools.checkpoint.facts import CheckpointFacts, Drafter, Quantization
from tools.checkpoint.index import INDEX_NAME, TensorIndex, read_index
from tools.checkpoint.sglang_rules import DraftLayout, draft_architecture, draft_layout, dspark_keys

DSPARK_SUBFOLDER = "dspark"  # SGLang's _DSPARK_DRAFT_SUBFOLDER: a draft with its own config.json


class ReadCheckpointArgs(BaseModel):
    """Read a local checkpoint's config.json and tensor index: architecture, quantization, drafters, cited."""

    model_path: str = Field(description="Local checkpoint folder (config.json, optionally model.safetensors.index.json)")
    package_dir: str = Field(description="The sglang package folder whose rules decide the drafters")


def _quantization(config: CheckpointConfig) -> Quantization | None:
    quant = config.flat.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    where = config.cite("quantization_config")
    block = quant.get("weight_block_size")
    block = [int(b) for b in block] if isinstance(block, list) and len(block) == 2 and \
        all(isinstance(b, int) and b > 0 for b in block) else None
    expert = quant.get("expert_dtype") or config.flat.get("expert_dtype")
    text = {k: (str(v) if v is not None else None) for k, v in
            {"method": quant.get("quant_method"), "fmt": quant.get("fmt"), "scale_fmt": quant.get("scale_fmt")}.items()}
    return Quantization(weight_block_size=block, expert_dtype=str(expert) if expert else None, **text,
                        cites={"method": f"{where}.quant_method", "weight_block_size": f"{where}.weight_block_size",
                               "scale_fmt": f"{where}.scale_fmt", "expert_dtype": f"{where}.expert_dtype"
                               if "expert_dtype" in quant else config.cite("expert_dtype")})


def _from_names(layout: DraftLayout, index: TensorIndex) -> tuple[bool, str, list[str]]:
    held = {m: index.holding(m) for m in layout.modules}
    missing = [m for m, names in held.items() if not names]
    rule = f"{layout.draft} builds {', '.join(layout.modules)} ({layout.origin.cite()})"
    if missing:
        return False, f"{rule}; {INDEX_NAME} lists no tensor for {', '.join(missing)}", []
    cites = [f"{INDEX_NAME}:{names[0]}" for names in held.values()]
    return True, f"{rule}; {INDEX_NAME} lists them ({', '.join(cites)})", cites


def _dspark(config: CheckpointConfig, package_dir: str, index: TensorIndex | None, folder: Path) -> Drafter | None:
    rule = dspark_keys(package_dir)
    target = config.architecture or ""
    branch = draft_architecture(package_dir, target, True, "DSPARK")
    if rule is None or branch is None or branch.bundled_dspark is not True:
        return None  # this SGLang loads no bundled DSpark drafter for the architecture
    keys, origin = rule
    names = [a for a in branch.algorithms or () if a]
    present = [k for k in keys if config.flat.get(k) is not None]
    block = config.flat.get("dspark_block_size")
    block = block if isinstance(block, int) and block > 0 else None
    if (folder / DSPARK_SUBFOLDER / "config.json").is_file():
        return Drafter(kind="dspark", carried=True, draft_architecture=branch.draft, block_size=block, algorithms=names,
                       how=f"a {DSPARK_SUBFOLDER}/ subfolder with its own config.json, which SGLang takes as the draft",
                       cites=[f"{DSPARK_SUBFOLDER}/config.json"])
    if not present:
        return Drafter(kind="dspark", carried=False, draft_architecture=branch.draft, algorithms=names,
                       how=f"none of {', '.join(keys)} in config.json, the keys SGLang reads as a bundled DSpark "
                           f"drafter ({origin.cite()})")
    cites = [config.cite(k) for k in present]
    how = f"config.json sets {', '.join(present)}, which SGLang reads as a bundled DSpark drafter ({origin.cite()})"
    layout = draft_layout(package_dir, branch.draft, target)
    if index is not None and layout is not None:
        found, said, named = _from_names(layout, index)
        return Drafter(kind="dspark", carried=found, draft_architecture=branch.draft, block_size=block,
                       algorithms=names, how=f"{how}; {said}", cites=cites + named)
    return Drafter(kind="dspark", carried=True, draft_architecture=branch.draft, algorithms=names,
                   block_size=block, how=how + (f" (no {INDEX_NAME}: its tensors were not checked)" if index is None
                                                else ""), cites=cites)


def _mtp_head(config: CheckpointConfig, package_dir: str, index: TensorIndex | None, bundled: bool) -> Drafter | None:
    target = config.architecture or ""
    branch = draft_architecture(package_dir, target, bundled, "EAGLE")
    if branch is None:
        return None  # SGLang loads no MTP draft from this architecture's checkpoint
    layout = draft_layout(package_dir, branch.draft, target)
    rewrite = f"SGLang loads {branch.draft} as the draft of {target} ({branch.origin.cite()})"
    if index is not None and layout is not None:
        found, said, named = _from_names(layout, index)
        return Drafter(kind="mtp_head", carried=found, draft_architecture=branch.draft, how=f"{rewrite}; {said}",
                       cites=named)
    layers = config.flat.get("num_nextn_predict_layers")
    key = config.cite("num_nextn_predict_layers")
    no_index = f"no {INDEX_NAME} to read tensor names from"
    if layers is not None and (not isinstance(layers, int) or layers < 1):
        return Drafter(kind="mtp_head", carried=False, draft_architecture=branch.draft,
                       how=f"{rewrite}; {key} is {layers!r}: no MTP layer", cites=[key])
    said = f"{key} is {layers}" if layers is not None else f"config.json does not set {key} (SGLang sets 1 itself)"
    if bundled:
        return Drafter(kind="mtp_head", carried=None, draft_architecture=branch.draft, cites=[key],
                       how=f"{rewrite}; {said}, but a DSpark-bundled checkpoint keeps that key without an "
                           f"MTP head (DeepSeek-V4-Flash-0731 does), and there is {no_index}")
    return Drafter(kind="mtp_head", carried=True, presumed=True, draft_architecture=branch.draft, cites=[key],
                   how=f"{rewrite}; {said} and no DSpark keys ({no_index}: presumed)")


def read_checkpoint(args: ReadCheckpointArgs) -> CheckpointFacts:
    """ToolError (one line) when config.json is missing or unreadable; everything else is a fact or an unknown."""
    return checkpoint_facts(read_config(args.model_path), args.package_dir)


def checkpoint_facts(config: CheckpointConfig, package_dir: str) -> CheckpointFacts:
    """The facts of a checkpoint whose config.json is already read (a campaign reads it once, in preflight)."""
    folder = Path(config.path).parent
    index, no_index = read_index(folder)
    unknowns = [] if index is not None or no_index.startswith("no ") else [no_index]
    if index is not None and index.missing_shards:
        unknowns.append(f"{INDEX_NAME} names {index.missing_shards} shard file(s) not in {folder}: tensor names "
                        "read, weights not checked")
    if config.architecture is None:
        unknowns.append("config.json names no architecture: no drafter can be decided")
        drafters: list[Drafter] = []
    else:
        dspark = _dspark(config, package_dir, index, folder)
        mtp = _mtp_head(config, package_dir, index, bundled=bool(dspark and dspark.carried))
        drafters = [d for d in (mtp, dspark) if d is not None]
    return CheckpointFacts(folder=str(folder), config=config.path, architecture=config.architecture,
                           written_architecture=config.written_architecture, nested=config.nested,
                           quantization=_quantization(config), drafters=drafters,
                           index=index.path if index else None, unknowns=unknowns)


READ_CHECKPOINT = Tool(name="read_checkpoint", args=ReadCheckpointArgs, run=read_checkpoint)
