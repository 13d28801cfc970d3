"""The model's architecture, decided once in this order: the checkpoint's config.json (as SGLang serves
it), else the user's --arch, else the SGLang tree (``decide_architecture``). The result says how it was
decided; an --arch that config.json outranks and contradicts is said in ``disagreement``.

Without a checkpoint we match the model id against the model classes SGLang defines
(``class DeepseekV4ForCausalLM(`` in ``srt/models/``): the longest class-name prefix (before
``For``) that starts the normalised model name wins (``deepseek-ai/DeepSeek-V4-Flash`` ->
``deepseekv4flash`` starts with ``deepseekv4``), unless the match stops right before a version
marker the class lacks (``DeepseekForCausalLM`` is no match for DeepSeek-V4). This is a guess, and
the answer says so. When no class name matches, the tree's own mentions of the model's family next
to a class name are read instead (``from_mentions``).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.checkpoint.config import CheckpointConfig
from tools.checkpoint.facts import CheckpointFacts
from tools.source.origin import Origin
from tools.recipes.model import model_name
from tools.source.search import SearchArgs, search

CLASS_DEF = r"^class\s+([A-Za-z0-9_]+For(?:CausalLM|ConditionalGeneration))\s*\("
DRAFT_HINT = re.compile(r"(NextN|MTP|Eagle|Draft|DSpark)", re.I)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


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


def _skips_a_version(name: str, prefix: str) -> bool:
    """Whether the prefix stops right before a version marker of the name: ``DeepseekForCausalLM``
    for DeepSeek-V4 leaves the "V4" unmatched, a different model generation, not a match."""
    tokens = re.findall(r"[a-z]+|\d+", name.lower())
    length = 0
    for at, token in enumerate(tokens):
        length += len(token)
        if length == len(prefix):
            rest = tokens[at + 1:at + 3]
            return len(rest) == 2 and rest[0] == "v" and rest[1].isdigit()
    return False


def from_tree(model: str, root: str, package_dir: str) -> tuple[str, Origin] | None:
    """Best class-name match for the model id among SGLang's model classes, with its definition."""
    # "org/Name" or just "Name": the class prefix may include the org (acme/Moe-7B -> AcmeMoe...)
    raw = [model_name(model), model]
    names = {_norm(n): n for n in raw}
    best: tuple[tuple[int, int, int], str, Origin] | None = None
    for name, origin in model_classes(root, package_dir):
        prefix = _norm(name.split("For")[0])
        if not prefix or not any(n.startswith(prefix) and not _skips_a_version(r, prefix) for n, r in names.items()):
            continue
        rank = (len(prefix), 0 if DRAFT_HINT.search(name) else 1, 1 if name.endswith("ForCausalLM") else 0)
        if best is None or rank > best[0]:
            best = (rank, name, origin)
    return (best[1], best[2]) if best else None


def _family_names(model: str) -> list[str]:
    """``zai-org/GLM-5-FP8`` -> ["GLM-5-FP8", "GLM-5"]: the name, then shorter prefixes that still
    carry a version number (a bare "GLM" would match every GLM)."""
    parts = [p for p in re.split(r"[-_]", model_name(model)) if p]
    names = []
    for end in range(len(parts), 0, -1):
        prefix = parts[:end]
        if end == len(parts) or any(re.search(r"\d", p) for p in prefix):
            names.append("-".join(prefix))
    return names


def _name_pattern(name: str, bounded: bool = True) -> str:
    """``GLM-5`` matches GLM-5, GLM5, GLM_5, glm 5 (bounded: not GLM-5.2 or GLM-50; ripgrep's engine
    has no look-around, so the search runs unbounded and the hits are filtered with the bounded form)."""
    core = r"[-_ ]?".join(re.escape(p) for p in name.split("-"))
    return r"(?<![A-Za-z0-9.])" + core + r"(?![A-Za-z0-9]|\.\d)" if bounded else core


def from_mentions(models: list[str], root: str, package_dir: str) -> dict[str, tuple[str, Origin]]:
    """Architecture of each model id from lines of the tree that name the model (or its family) next
    to one of SGLang's model classes, e.g. ``GLM-5, GLM-5.1 and GLM-5.2 share GlmMoeDsaForCausalLM``.

    One search over the package for all names; only a class named on the same line counts (a class
    a few lines away is a neighbour, not a statement about the model); the longest matching name
    wins, ties go to the class named most often. The caller says that this is read from a mention,
    with its citation."""
    classes = {name: origin for name, origin in model_classes(root, package_dir)}
    if not classes or not models:
        return {}
    names = {m: _family_names(m) for m in models}
    patterns = {n: re.compile(_name_pattern(n), re.I) for ns in names.values() for n in ns}
    combined = "|".join(f"(?:{_name_pattern(n, bounded=False)})" for n in patterns)
    hits = search(SearchArgs(pattern=f"(?i){combined}", root=package_dir, glob=["*.py"], max_hits=2000)).hits
    class_re = re.compile(r"\b(" + "|".join(sorted(map(re.escape, classes), key=len, reverse=True)) + r")\b")
    rel_base = Path(package_dir).relative_to(root).as_posix()
    found: dict[str, tuple[str, Origin]] = {}
    for model, family in names.items():
        scores: dict[str, tuple[int, int, Origin]] = {}
        for rank, name in enumerate(family):
            for hit in (h for h in hits if patterns[name].search(h.text)):
                for arch in class_re.findall(hit.text):  # named on the same line: a statement, not a neighbour
                    key = len(family) - rank
                    best = scores.get(arch)
                    origin = Origin(path=f"{rel_base}/{hit.path}", line=hit.line)
                    scores[arch] = (max(key, best[0]) if best else key, (best[1] if best else 0) + 1,
                                    origin if not best or key > best[0] else best[2])
        if scores:
            arch, (_, _, origin) = max(scores.items(), key=lambda kv: (kv[1][0], kv[1][1]))
            found[model] = (arch, origin)
    return found


DecidedBy = Literal["config.json", "--arch", "model name", "tree mention", "nothing"]
ORDER = "config.json, else --arch, else the SGLang tree"


class Architecture(BaseModel):
    """The architecture SGLang serves the model as, and how it was decided (``decide_architecture``)."""

    name: str | None = Field(description="e.g. DeepseekV4ForCausalLM (None: nothing names it)")
    decided_by: DecidedBy = Field(description="Which source decided it, in the order " + ORDER)
    cited: str | None = Field(None, description="The config.json read, or the tree's path:line")
    written: str | None = Field(None, description="config.json's architectures[0] when SGLang serves it renamed")
    overruled_arch: str | None = Field(None, description="An --arch config.json outranked and contradicted")

    def how(self) -> str:
        """How it was decided, in words, cited."""
        renamed = f" (written {self.written}; SGLang serves it as {self.name})" if self.written else ""
        return {"config.json": f"read from {self.cited}{renamed}", "--arch": "given with --arch",
                "model name": f"matched from the model name to {self.cited}, as no config.json or --arch names it",
                "tree mention": f"read from the tree naming the model's family next to it at {self.cited}, as no "
                                "config.json or --arch names it",
                "nothing": "named by no config.json, no --arch and no model class of the SGLang tree"}[self.decided_by]

    def line(self) -> str:
        """``architecture X <how>``: the one line every reader shows."""
        return f"architecture {self.name or 'unknown'} {self.how()}"

    def disagreement(self) -> str | None:
        """The note for the user when --arch contradicts config.json (None: it does not)."""
        if self.overruled_arch is None:
            return None
        return (f"--arch {self.overruled_arch} differs from {self.name} in {self.cited}: config.json decides "
                f"(the order is {ORDER}; docs/evidence.md), so {self.name} is used; drop --arch, or point "
                "--model-path at the checkpoint you mean")


def decide_architecture(model: str, arch: str | None, config: CheckpointConfig | CheckpointFacts | None,
                        root: str | None = None, package_dir: str | None = None) -> Architecture:
    """The architecture by the documented order: config.json (as read, or the facts read from it), --arch,
    the SGLang tree (model name, then the tree's mentions of the model's family); the tree is read only
    when the first two name none."""
    if config is not None and config.architecture:
        other = arch if arch and arch not in (config.architecture, config.written_architecture) else None
        renamed = config.written_architecture if config.written_architecture != config.architecture else None
        path = config.path if isinstance(config, CheckpointConfig) else config.config
        return Architecture(name=config.architecture, decided_by="config.json", cited=path,
                            written=renamed, overruled_arch=other)
    if arch:
        return Architecture(name=arch, decided_by="--arch")
    if root is not None and package_dir is not None:
        guessed = from_tree(model, root, package_dir)
        if guessed:
            return Architecture(name=guessed[0], decided_by="model name", cited=guessed[1].cite())
        mentioned = from_mentions([model], root, package_dir).get(model)
        if mentioned:
            return Architecture(name=mentioned[0], decided_by="tree mention", cited=mentioned[1].cite())
    return Architecture(name=None, decided_by="nothing")
