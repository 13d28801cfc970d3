"""Which (N, K) GEMM shapes to tune, and where each one came from.

Sources, in order: the user (``--shapes N,K``), SGLang's own warning in a server log (it names
the exact file it looked for), the model's ``config.json`` for DeepSeek V3/V4 families under a
tensor-parallel size, read as SGLang reads it (tools/checkpoint/config.py) with its drafter's GEMMs
(tools/tuning/shapes_deepseek.py, the derivation written out), else nothing (the caller may boot a
discovery server and mine its log).
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.checkpoint.config import CheckpointConfig, flatten, read_config
from tools.tuning.configs import parse_config_file_name
from tools.tuning.shapes_deepseek import Derivation, Drafter, derive


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


# -- config.json derivation (tools/tuning/shapes_deepseek.py) -----------------------------------
def derive_from_config(config: dict | CheckpointConfig, tp: int,
                       drafters: list[Drafter] | None = None) -> tuple[list[Shape], list[str]]:
    """Block-FP8 linear shapes of a DeepSeek V3/V4 model and its drafter under TP, with the derivation.

    ``config`` is the checkpoint's config as SGLang sees it (a raw dict is flattened the same way).
    """
    return _shapes(_derive(config, tp, drafters))


def _derive(config: dict | CheckpointConfig, tp: int, drafters: list[Drafter] | None) -> Derivation:
    if isinstance(config, dict):
        flat, nested = flatten(config)
        archs = flat.get("architectures")
        arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
        config = CheckpointConfig(path="config.json", raw=config, flat=flat, written_architecture=arch,
                                  architecture=arch, nested=nested)
    return derive(config, tp, drafters)


def _shapes(found: Derivation) -> tuple[list[Shape], list[str]]:
    if found.block is None:
        return [], found.lines
    block_n, block_k = found.block
    prefix = {"target": "", "mtp_head": "mtp_head.", "dspark": "dspark."}
    shapes = [Shape(n=row.n, k=row.k, block_n=block_n, block_k=block_k,
                    source=f"config.json:{prefix[row.part]}{row.layer.split(' ')[0]}",
                    why=f"{row.formula} [{row.cite}]") for row in found.rows]
    return _unique(shapes), found.lines


class FindShapesArgs(BaseModel):
    """Find the FP8 block-GEMM (N,K) shapes worth tuning: from the user, a server log, or config.json."""

    shapes: list[str] = Field(default_factory=list, description="User shapes 'N,K' (highest priority)")
    log_files: list[str] = Field(default_factory=list, description="Server logs to mine for default-config warnings")
    model_path: str | None = Field(None, description="Checkpoint folder or config.json to derive shapes from")
    config: CheckpointConfig | None = Field(None, description="That config.json when already read (a campaign's "
                                                              "preflight reads it once); None: read model_path")
    tp: int = Field(1, description="Tensor-parallel size the server runs with")
    drafters: list[Drafter] | None = Field(None, description="Drafters whose GEMMs to add: None decides from the "
                                                              "config (dspark_* keys -> dspark, else "
                                                              "num_nextn_predict_layers > 0 -> mtp_head); [] none")


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
    if args.config is not None or args.model_path:
        found = _derive(args.config or read_config(args.model_path), args.tp, args.drafters)
        shapes, lines = _shapes(found)
        return FindShapesResult(shapes=shapes, derivation=lines, note=lines[0] if not shapes else "derived from config.json",
                                no_block_fp8=found.no_block_fp8)
    return FindShapesResult(shapes=[], note="no --shapes, no server log with default-config warnings, no model "
                                           "config.json: a discovery boot of the server on the GPU host finds them")


FIND_SHAPES = Tool(name="find_tuning_shapes", args=FindShapesArgs, run=find_shapes)
