"""The model's architecture: from its local config.json, the user's --arch, or the SGLang tree.

Without a checkpoint we match the model id against the model classes SGLang defines
(``class DeepseekV4ForCausalLM(`` in ``srt/models/``): the longest class-name prefix (before
``For``) that starts the normalised model name wins (``deepseek-ai/DeepSeek-V4-Flash`` ->
``deepseekv4flash`` starts with ``deepseekv4``). This is a guess, and the answer says so.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from tools.base import ToolError
from tools.source.origin import Origin
from tools.source.search import SearchArgs, search

CLASS_DEF = r"^class\s+([A-Za-z0-9_]+For(?:CausalLM|ConditionalGeneration))\s*\("
DRAFT_HINT = re.compile(r"(NextN|MTP|Eagle|Draft|DSpark)", re.I)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def from_config(model_path: str) -> tuple[str, str] | None:
    """(architecture, config path) from a checkpoint folder's config.json."""
    config = Path(model_path).expanduser() / "config.json"
    if not config.is_file():
        return None
    try:
        data = json.loads(config.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ToolError(f"{config} is not readable JSON ({err}); fix the checkpoint or pass --arch") from None
    archs = data.get("architectures") or []
    return (archs[0], str(config)) if archs and isinstance(archs[0], str) else None


@lru_cache(maxsize=8)
def model_classes(root: str, package_dir: str) -> tuple[tuple[str, Origin], ...]:
    """Every ``class XForCausalLM(`` / ``XForConditionalGeneration(`` under srt/models, cited."""
    models_dir = Path(package_dir) / "srt" / "models"
    if not models_dir.is_dir():
        return ()
    hits = search(SearchArgs(pattern=CLASS_DEF, root=str(models_dir), glob=["*.py"], max_hits=5000)).hits
    found = []
    for hit in hits:
        match = re.match(CLASS_DEF, hit.text)
        if match:
            found.append((match.group(1), Origin(path=(models_dir / hit.path).relative_to(root).as_posix(),
                                                 line=hit.line)))
    return tuple(found)


def from_tree(model: str, root: str, package_dir: str) -> tuple[str, Origin] | None:
    """Best class-name match for the model id among SGLang's model classes, with its definition."""
    # "org/Name" or just "Name": the class prefix may include the org (acme/Moe-7B -> AcmeMoe...)
    names = {_norm(model.rstrip("/").split("/")[-1]), _norm(model)}
    best: tuple[tuple[int, int, int], str, Origin] | None = None
    for name, origin in model_classes(root, package_dir):
        prefix = _norm(name.split("For")[0])
        if not prefix or not any(n.startswith(prefix) for n in names):
            continue
        rank = (len(prefix), 0 if DRAFT_HINT.search(name) else 1, 1 if name.endswith("ForCausalLM") else 0)
        if best is None or rank > best[0]:
            best = (rank, name, origin)
    return (best[1], best[2]) if best else None
