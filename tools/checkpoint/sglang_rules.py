"""What SGLang's tree says about a checkpoint's drafters, read from its source (never assumed):

- which ``config.json`` keys mark a bundled DSpark drafter (``checkpoint_bundles_dspark_draft``);
- which draft architecture SGLang loads for a target architecture and algorithm (the draft branch of
  ``ModelConfig._config_draft_model``: for DeepSeek-V4, DSPARK or no algorithm on a DSpark-bundled
  checkpoint loads the DSpark drafter, anything else the NextN/MTP head);
- which tensors a draft class loads that its target does not: the projections and norms it builds
  (``self.e_proj = ReplicatedLinear(...)``), the names a checkpoint must hold for it to load.

These rules change between SGLang versions, so a tree without them gives ``None`` and the caller
says the fact cannot be decided.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tools.source.origin import Origin
from tools.source.pysource import parse_file

DSPARK_CONFIG = "srt/speculative/dspark_components/dspark_config.py"
MODEL_CONFIG = "srt/configs/model_config.py"
SPECULATIVE_HOOK = "srt/arg_groups/speculative_hook.py"
# Calls that build a module whose weights a checkpoint must carry.
_WEIGHTED = ("Linear", "RMSNorm", "LayerNorm", "Head", "head")


@dataclass(frozen=True)
class DraftBranch:
    """One draft-architecture rewrite: for ``target``, load ``draft`` when ``bundled_dspark`` (None:
    whatever the checkpoint holds) and the algorithm is in ``algorithms`` (None: any)."""

    target: str
    draft: str
    bundled_dspark: bool | None
    algorithms: tuple[str | None, ...] | None
    origin: Origin

    def matches(self, target: str, bundled: bool, algorithm: str | None) -> bool:
        return (self.target == target and (self.bundled_dspark is None or self.bundled_dspark == bundled)
                and (self.algorithms is None or algorithm in self.algorithms))


@dataclass(frozen=True)
class DraftLayout:
    """The modules a draft class builds that its target model does not: their names in a checkpoint."""

    draft: str
    modules: tuple[str, ...]
    origin: Origin  # the draft class's definition


def _rel(package_dir: Path, path: Path) -> str:
    return (Path(package_dir.name) / path.relative_to(package_dir)).as_posix()


def _function(path: Path, name: str) -> ast.FunctionDef | None:
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


@lru_cache(maxsize=8)
def dspark_keys(package_dir: str) -> tuple[tuple[str, ...], Origin] | None:
    """The config keys whose presence means SGLang treats the checkpoint as bundling a DSpark drafter."""
    path = Path(package_dir) / DSPARK_CONFIG
    func = _function(path, "checkpoint_bundles_dspark_draft")
    if func is None:
        return None
    keys = tuple(n.value for n in ast.walk(func) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value.startswith("dspark_"))
    return (keys, Origin(path=_rel(Path(package_dir), path), line=func.lineno)) if keys else None


@lru_cache(maxsize=8)
def dspark_draft_default(package_dir: str) -> Origin | None:
    """Where the speculative hook defaults DSPARK's draft path to the target checkpoint when it bundles one."""
    path = Path(package_dir) / SPECULATIVE_HOOK
    func = _function(path, "_handle_dspark")
    if func is None:
        return None
    for node in ast.walk(func):
        if isinstance(node, ast.If) and "bundles_dspark_draft" in ast.unparse(node.test):
            return Origin(path=_rel(Path(package_dir), path), line=node.lineno)
    return None


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _assigned_architecture(body: list[ast.stmt]) -> str | None:
    """``self.hf_config.architectures[0] = "X"`` directly in ``body``."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and \
                "architectures[0]" in ast.unparse(stmt.targets[0]):
            return str(stmt.value.value)
    return None


def _algorithms(test: ast.expr) -> tuple[str | None, ...] | None:
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and "speculative_algorithm" in ast.unparse(node.left):
            found = [n.value for n in ast.walk(node.comparators[0]) if isinstance(n, ast.Constant)]
            return tuple(v if isinstance(v, str) else None for v in found)
    return None


@lru_cache(maxsize=8)
def draft_branches(package_dir: str) -> tuple[DraftBranch, ...]:
    """Every draft-architecture rewrite in ``_config_draft_model``, in source order."""
    path = Path(package_dir) / MODEL_CONFIG
    func = _function(path, "_config_draft_model")
    if func is None:
        return ()
    rel = _rel(Path(package_dir), path)
    found: list[DraftBranch] = []
    for node in func.body:
        if not (isinstance(node, ast.If) and "architectures[0]" in ast.unparse(node.test)):
            continue
        targets = [s for s in _strings(node.test) if s[:1].isupper()]
        direct = _assigned_architecture(node.body)
        for target in targets:
            if direct:
                found.append(DraftBranch(target, direct, None, None, Origin(path=rel, line=node.lineno)))
        for inner in (s for s in node.body if isinstance(s, ast.If)):
            if "bundles_dspark_draft" not in ast.unparse(inner.test):
                continue
            when, otherwise = _assigned_architecture(inner.body), _assigned_architecture(inner.orelse)
            algorithms = _algorithms(inner.test)
            for target in targets:
                if when:
                    found.append(DraftBranch(target, when, True, algorithms, Origin(path=rel, line=inner.lineno)))
                if otherwise:
                    found.append(DraftBranch(target, otherwise, None, None, Origin(path=rel, line=inner.lineno)))
    return tuple(found)


def draft_architecture(package_dir: str, target: str, bundled: bool,
                       algorithm: str | None) -> DraftBranch | None:
    """The draft class SGLang loads for this target, checkpoint and algorithm (None: no rewrite known)."""
    return next((b for b in draft_branches(package_dir) if b.matches(target, bundled, algorithm)), None)


def _class_file(package_dir: Path, name: str) -> tuple[Path, int] | None:
    models = package_dir / "srt" / "models"
    needle = f"class {name}("
    for path in sorted(models.glob("*.py")) if models.is_dir() else []:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if needle in text:
            return path, text[:text.index(needle)].count("\n") + 1
    return None


def _weighted_modules(path: Path) -> set[str]:
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func).split(".")[-1]
            if any(called.endswith(w) or (called.startswith("build_") and w in called) for w in _WEIGHTED):
                names |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)
                          and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return names


@lru_cache(maxsize=16)
def draft_layout(package_dir: str, draft: str, target: str) -> DraftLayout | None:
    """The modules ``draft`` builds that ``target``'s own model file does not: what the checkpoint must carry."""
    base = Path(package_dir)
    found, target_file = _class_file(base, draft), _class_file(base, target)
    if found is None or target_file is None:
        return None
    modules = sorted(_weighted_modules(found[0]) - _weighted_modules(target_file[0]))
    return DraftLayout(draft=draft, modules=tuple(modules),
                       origin=Origin(path=_rel(base, found[0]), line=found[1])) if modules else None
