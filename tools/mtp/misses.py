"""Every miss explained: the files of the tree that name the model asked about and give no usable recipe.

A file names the model by its id (``"Qwen/Qwen3-32B"``, or its last part) or through a module constant
that holds it (``DEFAULT_TARGET_MODEL_EAGLE3 = "meta-llama/Llama-3.1-8B-Instruct"``, then
``DEFAULT_TARGET_MODEL_EAGLE3`` elsewhere). Each such file's launches are read (all of them, speculative
or not), and each file without a usable recipe for the model is reported with ``path:line`` and what
was not read: the file is skipped (does not parse, over the cap, outside the tree), its launches of the
model carry no ``--speculative-*`` flags (one line for all such files), its recipes are refused (the
first reason), its launch names the model through an expression the reader cannot resolve, or the model
reaches something that is not a server launch (``sgl.Engine(...)``), named with its line.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tools.mtp.answer import Candidate
from tools.recipes import ExtractRecipesArgs, Recipe, extract_recipes
from tools.recipes.extract import test_folders
from tools.source.pysource import parse_file
from tools.source.research_cache import ResearchScope
from tools.source.search import SearchArgs, search

MAX_FILES = 200     # files read for one model (a default test model is named by hundreds in a checkout)
MAX_LISTED = 20     # detailed entries; the rest are counted


def _same_model(a: str | None, b: str) -> bool:
    if not a:
        return False
    x, y = a.lower().rstrip("/"), b.lower().rstrip("/")
    return x == y or x.split("/")[-1] == y.split("/")[-1]


def naming_files(model: str, root: Path, package_dir: Path) -> dict[str, int]:
    """rel path -> first line that names the model (directly or through a constant holding it)."""
    short = model.rstrip("/").split("/")[-1]
    bounded = re.compile(r"(?<![\w.-])" + re.escape(short) + r"(?![\w.-])", re.I)
    found: dict[str, int] = {}
    constants: dict[str, set[str]] = {}  # NAME -> the files defining it
    definitions: set[tuple[str, int]] = set()
    for folder in test_folders(root, package_dir):
        base = folder.relative_to(root).as_posix()
        hits = search(SearchArgs(pattern=short, root=str(folder), glob=["*.py"], fixed_string=True, ignore_case=True,
                                 max_hits=5000)).hits
        for hit in hits:
            if not bounded.search(hit.text):
                continue
            rel = f"{base}/{hit.path}"
            constant = _constant_at(folder / hit.path, hit.line)
            if constant:
                constants.setdefault(constant[0], set()).add(rel)
                definitions.update((rel, line) for line in range(constant[1], hit.line + 1))
                continue  # a definition is not a use: its uses are found below
            found.setdefault(rel, hit.line)
    if constants:
        pattern = r"\b(" + "|".join(sorted(map(re.escape, constants))) + r")\b"
        for folder in test_folders(root, package_dir):
            base = folder.relative_to(root).as_posix()
            for hit in search(SearchArgs(pattern=pattern, root=str(folder), glob=["*.py"], max_hits=5000)).hits:
                rel = f"{base}/{hit.path}"
                if (rel, hit.line) in definitions or _in_import(root / rel, hit.line):
                    continue
                names = {n for n in constants if re.search(rf"\b{n}\b", hit.text)}
                if any(rel in constants[n] or n in _imported(root / rel) for n in names):  # not a namesake
                    found[rel] = min(found.get(rel, hit.line), hit.line)
    return dict(sorted(found.items()))


def _constant_at(path: Path, line: int) -> tuple[str, int] | None:
    """The module-level UPPER_CASE name whose assignment spans ``line`` (``NAME = "org/model"``, or a
    path built from it over several lines), if any."""
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno <= line <= (node.end_lineno or node.lineno):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
            return (names[0], node.lineno) if names else None
    return None


def _imports(path: Path) -> list[ast.ImportFrom]:
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]


def _imported(path: Path) -> set[str]:
    return {a.asname or a.name for n in _imports(path) for a in n.names}


def _in_import(path: Path, line: int) -> bool:
    return any(n.lineno <= line <= (n.end_lineno or n.lineno) for n in _imports(path))


def _unread_call(path: Path, model: str, line: int) -> str | None:
    """The call that receives the model on or after ``line`` when it is no launch we read: 'Engine(...) at
    line N'."""
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return None
    short = model.rstrip("/").split("/")[-1].lower()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno >= line - 3:
            words = " ".join(ast.unparse(a) for a in [*node.args, *(k.value for k in node.keywords)]).lower()
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name and ("model" in words or short in words) and re.search(r"engine|runner|bench|client|run_", name,
                                                                           re.I):
                return f"{name}(...) at line {node.lineno}"
    return None


def explain(model: str, root: Path, package_dir: Path, candidates: list[Candidate], warnings: list[str],
            scope: ResearchScope | None = None) -> list[str]:
    """Lines for ``unknowns``: each file naming the model that gives no usable recipe for it, and why."""
    files = naming_files(model, root, package_dir)
    usable = {c.origin.path for c in candidates if _same_model(c.model, model) and not c.rejected and c.complete}
    pending = {rel: line for rel, line in files.items() if rel not in usable}
    if not pending:
        return []
    read = list(pending)[:MAX_FILES]
    result = extract_recipes(ExtractRecipesArgs(root=str(root), package_dir=str(package_dir), paths=read, pattern="",
                                                max_recipes=5000), scope)
    by_file: dict[str, list[Recipe]] = {}
    for recipe in result.recipes:
        by_file.setdefault(recipe.origin.path, []).append(recipe)
    skipped = {w.split(": ", 1)[0]: w.split(": ", 1)[1] for w in [*warnings, *result.warnings] if ": " in w}
    refused = {c.origin.path: c for c in candidates if _same_model(c.model, model) and (c.rejected or not c.complete)}
    lines: list[str] = []
    plain: list[str] = []
    for rel in read:
        at = f"{rel}:{pending[rel]}"
        mine = [r for r in by_file.get(rel, []) if _same_model(r.model, model)]
        if rel in skipped:
            lines.append(f"not read: {at} names {model}, but the file was {skipped[rel]}")
        elif rel in refused:
            cand = refused[rel]
            if cand.rejected:
                lines.append(f"not usable: {at} names {model}; its recipe {cand.name} is refused: {cand.rejected[0]}")
            else:
                lines.append(f"incomplete: {at} names {model}; its recipe {cand.name} needs "
                             + ", ".join(f"${v} for {k}" for k, v in cand.needs.items()) + " (an input you must give)")
        elif mine and not any(r.speculative for r in mine):
            plain.append(at)
        elif mine:
            lines.append(f"not usable: {at} names {model}; its recipe {mine[0].name} has speculative flags but no "
                         "usable algorithm")
        else:
            unresolved = [r for r in by_file.get(rel, []) if r.model is None]
            call = _unread_call(root / rel, model, pending[rel])
            if unresolved:
                what = (f"its launch at {unresolved[0].launch.cite()} takes the model from a parameter or an "
                        "expression static reading cannot resolve")
            elif call:
                what = f"the model goes to {call}, which is not a server launch the reader follows (popen_launch_server, " \
                       "launch settings)"
            else:
                what = "no server launch of it is reached from a class or function of the file"
            lines.append(f"not read: {at} names {model}, but {what}")
    if plain:
        lines.append(f"{len(plain)} file(s) launch {model} without --speculative-* flags (no MTP evidence): "
                     + ", ".join(plain[:MAX_LISTED]) + (f", and {len(plain) - MAX_LISTED} more" if len(plain) > MAX_LISTED
                                                        else ""))
    if len(pending) > len(read):
        lines.append(f"{len(pending) - len(read)} more file(s) name {model} and were not read (limit {MAX_FILES})")
    detailed = [line for line in lines if not line[0].isdigit()]
    if len(detailed) > MAX_LISTED:
        rest = len(detailed) - MAX_LISTED
        lines = detailed[:MAX_LISTED] + [f"and {rest} more file(s) naming {model} without a usable recipe"] + \
            [line for line in lines if line[0].isdigit()]
    return lines
