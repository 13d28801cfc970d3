"""The ``extract_recipes`` tool: pick the files, parse them, build recipes, cap the output.

Files are chosen with ripgrep (fast on a 6k-file tree): test files that mention ``speculative``,
then files that subclass a class defined in those (a registered test that only sets ``model``
on a fixture's MTP base class says nothing about speculation itself).
"""
from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.source.confine import inside_root
from tools.source.pysource import gc_paused
from tools.source.research_cache import ResearchScope
from tools.recipes.launches import RecipeBuilder
from tools.recipes.model import Recipe
from tools.recipes.modules import ModuleIndex
from tools.recipes.calls import CallingEvaluator
from tools.source.search import SearchArgs, search

MAX_FILES = 3000


class ExtractRecipesArgs(BaseModel):
    """Extract server launch recipes (flags, env, model, hardware, tp/dp/ep) from SGLang test files and fixtures."""

    root: str = Field(description="The SGLang source root")
    package_dir: str = Field(description="The sglang/ package folder (imports are resolved from its parent)")
    paths: list[str] = Field(default_factory=list, description="Files or folders relative to root; "
                                                               "default: the test folders of the tree")
    pattern: str = Field("speculative", description="Only files whose text matches this regex (plus files "
                                                    "subclassing their classes); '' = every .py file")
    model: str | None = Field(None, description="Keep recipes whose model id contains this (case-insensitive)")
    speculative_only: bool = Field(False, description="Keep only recipes with --speculative-* flags")
    max_recipes: int = Field(300, ge=1, le=5000, description="Return at most this many recipes")


class RecipesResult(BaseModel):
    recipes: list[Recipe]
    files_scanned: int
    warnings: list[str] = Field(default_factory=list, description="Files skipped and why")
    truncated: bool = False
    note: str = ""


def test_folders(root: Path, package_dir: Path) -> list[Path]:
    """Where recipes live: test/registered in a checkout, sglang/test in every layout."""
    return [p for p in (root / "test", package_dir / "test") if p.is_dir()]


def _files(folders: list[Path], pattern: str) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        if folder.is_file():
            found.append(folder)
            continue
        if not pattern:
            found += sorted(folder.rglob("*.py"))
            continue
        result = search(SearchArgs(pattern=pattern, root=str(folder), glob=["*.py"], files_only=True,
                                   max_hits=MAX_FILES))
        found += [folder / hit.path for hit in result.hits]
    return found


def extract_recipes(args: ExtractRecipesArgs, scope: ResearchScope | None = None) -> RecipesResult:
    """``scope``: the tree's research cache entry point, when the caller asks more of the same tree."""
    scope = scope or ResearchScope(args.root, args.package_dir)
    if any(not scope.covers(Path(args.root) / p) for p in args.paths):
        return _parse_heavy(args)  # a folder outside what the cache's digest reads
    return scope.cached("recipes", args, RecipesResult, lambda: _parse_heavy(args))


def _parse_heavy(args: ExtractRecipesArgs) -> RecipesResult:
    with gc_paused():  # see tools/source/pysource.py
        return _extract_recipes(args)


def _extract_recipes(args: ExtractRecipesArgs) -> RecipesResult:
    root, package_dir = Path(args.root), Path(args.package_dir)
    if not package_dir.is_dir():
        raise ToolError(f"{package_dir} is not a folder; resolve the SGLang source first (resolve_source)")
    for relative in args.paths:
        inside_root(root, relative)  # the model picks these: nothing outside the source is read
    folders = [root / p for p in args.paths] if args.paths else test_folders(root, package_dir)
    missing = [str(f) for f in folders if not f.exists()]
    if missing:
        raise ToolError(f"no such file or folder: {', '.join(missing)}; paths are relative to {root}")
    index = ModuleIndex(root, package_dir.parent)
    files = _files(folders, args.pattern)
    modules = [m for m in (index.parse(f) for f in files) if m is not None]
    if args.pattern and modules:
        # second stage: files that build on classes defined in the first (fixtures' subclasses)
        names = sorted({name for m in modules for name in m.classes})
        if names:
            alternation = r"\b(" + "|".join(re.escape(n) for n in names) + r")\b"
            more = [f for f in _files([f for f in folders if f.is_dir()], alternation) if f not in set(files)]
            modules += [m for m in (index.parse(f) for f in more) if m is not None]
    builder = RecipeBuilder(CallingEvaluator(index))
    recipes: list[Recipe] = []
    seen: set[tuple] = set()
    for module in modules:
        for recipe in builder.from_module(module):
            key = (recipe.name, recipe.model, tuple(recipe.flags.items()), tuple(recipe.env.items()))
            if key in seen:
                continue
            seen.add(key)
            if args.speculative_only and not recipe.speculative:
                continue
            if args.model and (recipe.model is None or args.model.lower() not in recipe.model.lower()):
                continue
            recipes.append(recipe)
    truncated = len(recipes) > args.max_recipes
    note = (f"[cut: {len(recipes) - args.max_recipes} more recipes; limit max_recipes={args.max_recipes}]"
            if truncated else "")
    return RecipesResult(recipes=recipes[: args.max_recipes], files_scanned=len(modules),
                         warnings=index.warnings, truncated=truncated, note=note)


EXTRACT_RECIPES = Tool(name="extract_recipes", args=ExtractRecipesArgs, run=extract_recipes)
