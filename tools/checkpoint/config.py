"""A checkpoint's ``config.json``, read bounded and flattened the way SGLang flattens it.

SGLang serves DeepSeek-V4.1 from a config that nests the language model under ``text_config``
(and a vision tower under ``vision_config``); its config class merges the text fields into the top
level (top-level keys win), maps vision fields to ``vision_*`` names and serves the
``DeepseekV41ForCausalLM`` architecture as ``DeepseekV4ForCausalLM``
(``srt/configs/deepseek_v41.py:normalize_deepseek_v41_config``). Other multimodal configs are read
through their ``text_config`` too (``get_hf_text_config``). Every reader of a model's shape takes
the flat view made here, never the raw file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.source.confine import read_bounded

# A real config.json is a few kB (DeepSeek-V4.1's, with its vision tower, is under 5 kB).
MAX_CONFIG_BYTES = 1024 * 1024
# SGLang's own rename of V4.1's architecture (srt/configs/deepseek_v41.py).
SERVED_AS = {"DeepseekV41ForCausalLM": "DeepseekV4ForCausalLM"}
# Vision fields SGLang copies to the top level under another name when it flattens V4.1.
VISION_FIELDS = {"num_hidden_layers": "vision_n_layers", "hidden_size": "vision_dim",
                 "num_attention_heads": "vision_n_heads", "intermediate_size": "vision_inter_dim",
                 "patch_size": "vision_patch_size", "rope_theta": "vision_rope_theta"}


class CheckpointConfig(BaseModel):
    """The config as written and as SGLang sees it."""

    path: str = Field(description="The config.json read")
    raw: dict[str, Any] = Field(description="The file as written")
    flat: dict[str, Any] = Field(description="The keys SGLang's model config sees (text_config merged in)")
    written_architecture: str | None = Field(description="architectures[0] as written")
    architecture: str | None = Field(description="The architecture SGLang serves it as")
    nested: bool = Field(False, description="The language model's fields came from text_config")

    def cite(self, key: str) -> str:
        """``config.json:<key>``, or ``config.json:text_config.<key>`` where the value was nested."""
        nested = self.nested and key not in self.raw and isinstance(self.raw.get("text_config"), dict) \
            and key in self.raw["text_config"]
        return f"config.json:{'text_config.' if nested else ''}{key}"


def flatten(raw: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(flat config, whether text_config was merged): the text fields under the top-level ones."""
    text, vision = raw.get("text_config"), raw.get("vision_config")
    if not isinstance(text, dict):
        return dict(raw), False
    flat = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config")}
    flat = {**{k: v for k, v in text.items() if k != "model_type"}, **flat}
    if isinstance(vision, dict):
        for source, target in VISION_FIELDS.items():
            if source in vision:
                flat.setdefault(target, vision[source])
    archs = flat.get("architectures")
    if isinstance(archs, list) and len(archs) == 1 and archs[0] in SERVED_AS:
        flat["architectures"] = [SERVED_AS[archs[0]]]
    return flat, True


def _first_architecture(config: dict[str, Any]) -> str | None:
    archs = config.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def config_path(model_path: str | Path) -> Path:
    """The config.json of a checkpoint folder (or the file itself when given one)."""
    path = Path(model_path).expanduser()
    return path if path.name.endswith(".json") and not path.is_dir() else path / "config.json"


def read_config(model_path: str | Path) -> CheckpointConfig:
    """The checkpoint's config; ToolError naming the problem and the fix when it cannot be read."""
    path = config_path(model_path)
    if not path.exists():
        raise ToolError(f"no config.json at {path}; pass --model-path to the local checkpoint folder")
    try:
        data = read_bounded(path, MAX_CONFIG_BYTES)
    except ValueError as err:
        raise ToolError(f"{path} is {err}; a model's config.json is a few kB: check the checkpoint download") \
            from None
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        why = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
        raise ToolError(f"{path} is not valid JSON ({why}); check the checkpoint download") from None
    if not isinstance(raw, dict):
        raise ToolError(f"{path} holds a JSON {type(raw).__name__}, not an object; check the checkpoint download")
    flat, nested = flatten(raw)
    return CheckpointConfig(path=str(path), raw=raw, flat=flat, written_architecture=_first_architecture(raw),
                            architecture=_first_architecture(flat), nested=nested)
