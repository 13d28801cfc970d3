"""Dependency pins that moved between two commits, and the command that installs the new ones.

Reads every Python packaging file the diff touched (``pyproject*.toml``, ``requirements*.txt``,
``constraints*.txt``) at the old and the new commit and compares requirement by requirement
(keyed by file, group, package and environment marker, so per-platform torch pins stay apart).
The reinstall command is for the interpreter that has SGLang (never the agent's own venv); every
requirement string comes from upstream text, so each one is shell-quoted.
"""
from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import PurePosixPath
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, Field

from tools.sync.gitpython import git
from tools.sync.repo import read_blob

# Packages whose version decides whether SGLang's compiled kernels load at all.
KEY_PACKAGES = frozenset(canonicalize_name(n) for n in (
    "sgl-kernel", "sglang-kernel", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache",
    "torch", "torchvision", "torchaudio", "transformers", "triton", "deep-gemm", "xgrammar",
    "cuda-python", "nvidia-cutlass-dsl", "flash-attn", "tokenizers", "sgl-fa4"))

_REQ_FILE = re.compile(r"^(requirements|constraints)[\w.-]*\.(txt|in)$")
_TOML_FILE = re.compile(r"^pyproject[\w.-]*\.toml$")


class PinChange(BaseModel):
    package: str = Field(description="Canonical package name")
    file: str
    group: str = Field(description="project.dependencies, optional:<extra>, build-system, or the requirements file")
    change: Literal["added", "removed", "changed"]
    old: str | None = Field(None, description="Old requirement string")
    new: str | None = Field(None, description="New requirement string")
    key: bool = Field(description="One of the packages SGLang's kernels are built against")


class DependencyReport(BaseModel):
    files: list[str] = Field(default_factory=list, description="Packaging files changed old..new")
    changes: list[PinChange] = Field(default_factory=list)
    reinstall: str | None = Field(None, description="Run in the SGLang environment; None when nothing to install")
    extras_note: str | None = Field(None, description="Optional-group pins that moved (install if you use the extra)")
    unreadable: list[str] = Field(default_factory=list, description="Files that could not be parsed, with why")


def is_packaging_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return bool(_TOML_FILE.match(name) or _REQ_FILE.match(name))


def _requirements_of_toml(text: str) -> dict[str, list[str]]:
    data = tomllib.loads(text)
    groups: dict[str, list[str]] = {}
    project = data.get("project", {})
    groups["project.dependencies"] = list(project.get("dependencies", []))
    for extra, reqs in project.get("optional-dependencies", {}).items():
        groups[f"optional:{extra}"] = list(reqs)
    for name, reqs in data.get("dependency-groups", {}).items():
        groups[f"group:{name}"] = [r for r in reqs if isinstance(r, str)]
    groups["build-system"] = list(data.get("build-system", {}).get("requires", []))
    return groups


def _requirements_of_txt(text: str, path: str) -> dict[str, list[str]]:
    lines = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):  # options (-r, -e, --index-url) are not pins
            lines.append(line)
    return {path: lines}


def _parse(path: str, text: str | None) -> dict[tuple[str, str, str], str]:
    """(group, package, marker) -> requirement string, for one file's text (None: absent)."""
    if text is None:
        return {}
    name = PurePosixPath(path).name
    groups = _requirements_of_toml(text) if _TOML_FILE.match(name) else _requirements_of_txt(text, path)
    table: dict[tuple[str, str, str], str] = {}
    for group, reqs in groups.items():
        for spec in reqs:
            try:
                req = Requirement(spec)
            except InvalidRequirement:
                continue  # a self-reference like "sglang[srt]" parses; anything else odd is not a pin
            table[(group, canonicalize_name(req.name), str(req.marker or ""))] = spec.strip()
    return table


def _same(a: str, b: str) -> bool:
    return str(Requirement(a)) == str(Requirement(b))  # ignores spacing differences only


def dependency_report(repo: git.Repo, old: str, new: str, changed: list[str], sglang_python: str) -> DependencyReport:
    files = [p for p in changed if is_packaging_file(p)]
    report = DependencyReport(files=files)
    for path in files:
        try:
            before = _parse(path, read_blob(repo, old, path))
            after = _parse(path, read_blob(repo, new, path))
        except tomllib.TOMLDecodeError as err:
            report.unreadable.append(f"{path}: not valid TOML ({err})")
            continue
        for key in sorted(set(before) | set(after)):
            group, package, _marker = key
            was, now = before.get(key), after.get(key)
            if was is not None and now is not None and _same(was, now):
                continue
            kind = "added" if was is None else "removed" if now is None else "changed"
            report.changes.append(PinChange(package=package, file=path, group=group, change=kind, old=was,
                                            new=now, key=package in KEY_PACKAGES))
    report.reinstall = reinstall_command(report.changes, sglang_python, runtime=True)
    extras = reinstall_command(report.changes, sglang_python, runtime=False)
    if extras:
        report.extras_note = f"optional-dependency pins moved; if you installed those extras: {extras}"
    return report


def _is_runtime(change: PinChange) -> bool:
    return change.group == "project.dependencies" or _REQ_FILE.match(PurePosixPath(change.file).name) is not None


def reinstall_command(changes: list[PinChange], sglang_python: str, runtime: bool) -> str | None:
    """`<sglang_python> -m pip install '<new spec>' ...` for added/changed pins; None if none."""
    specs: list[str] = []
    for change in changes:
        if change.new is None or _is_runtime(change) != runtime or change.group == "build-system":
            continue
        if canonicalize_name(Requirement(change.new).name) == "sglang":
            continue  # the checkout itself: it is already on disk
        if change.new not in specs:
            specs.append(change.new)
    if not specs:
        return None
    return " ".join([shlex.quote(sglang_python), "-m", "pip", "install", *map(shlex.quote, specs)])
