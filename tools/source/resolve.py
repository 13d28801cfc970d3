"""Where the SGLang source comes from, and what it holds.

The first that applies wins: an explicit path (a checkout or a package folder); env ``SGLANG_SRC``;
the ``sglang`` the SGLang interpreter can import, found with ``importlib.util.find_spec`` so that
sglang (torch, CUDA) is never imported; the PyPI wheel of the version, downloaded once into the
cache (``DSV4_CACHE_DIR``) and unpacked by ``ensure_wheel_source``.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.defaults import SGLANG_PYTHON, SGLANG_VERSION
from tools.source.group_run import run_grouped
from tools.child_env import child_env
from tools.source.layout import find_package

# Folders a full checkout has and a wheel lacks; reported so readers know what evidence is missing.
CHECKOUT_ONLY = ("test/registered", "benchmark/kernels", "docs")


def cache_dir() -> Path:
    return Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent")


def ensure_wheel_source(version: str, cache: Path | None = None) -> Path:
    root = (cache or cache_dir()) / "sglang-src" / f"sglang-{version}"
    if (root / "sglang" / "__init__.py").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    # One downloader at a time: a second process (another campaign, a parallel test worker)
    # waits, then finds the folder complete instead of replacing it under the first one's readers.
    with open(root.parent / f".sglang-{version}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "sglang" / "__init__.py").exists():
            return root
        return _download_wheel(version, root)


def _download_wheel(version: str, root: Path) -> Path:
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-d", tmp, f"sglang=={version}"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
        wheels = list(Path(tmp).glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ToolError(f"could not download sglang=={version} from PyPI ({tail[0]}); "
                            "pass --sglang PATH to a checkout or an installed package instead")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(unpacked)
        if root.exists():  # a half-unpacked folder from a crash: replace it
            shutil.rmtree(root)
        os.replace(unpacked, root)  # atomic: a crash never leaves a half-unpacked cache
    return root


class ResolveSourceArgs(BaseModel):
    """Find the SGLang source tree to read evidence from (checkout, installed package or PyPI wheel)."""

    path: str | None = Field(None, description="A git checkout of SGLang or a folder containing sglang/; "
                                                "None = SGLANG_SRC, then the SGLang python, then the wheel")
    sglang_python: str = Field(SGLANG_PYTHON, description="Interpreter that has SGLang installed")
    version: str = Field(SGLANG_VERSION, description="PyPI version to download when nothing else is found")
    lookup_timeout_s: float = Field(10, gt=0, description="How long the SGLang interpreter may take to say where "
                                                         "sglang is (find_spec only: no import)")


class SourceInfo(BaseModel):
    kind: Literal["checkout", "package", "wheel"]
    root: str = Field(description="Folder to search: a checkout's repo root, or the parent of sglang/")
    package_dir: str = Field(description="The sglang/ package folder")
    version: str | None = None
    commit: str | None = None
    lacks: list[str] = Field(default_factory=list, description="Evidence folders this source does not have")
    how: str = Field("", description="Which resolution rule picked this source")
    notes: list[str] = Field(default_factory=list, description="What went wrong on the way (an interpreter "
                                                               "that did not answer)")


def _layout(path: Path) -> tuple[Path, Path] | None:
    """(root, package_dir) for a checkout, a package parent or the sglang/ folder itself."""
    package = find_package(path)
    if package is None:
        return None
    return (path.parent if package == path else path), package


def _read_version(root: Path, package_dir: Path) -> str | None:
    for meta in sorted(root.glob("sglang-*.dist-info/METADATA")):
        match = re.search(r"^Version:\s*(\S+)", meta.read_text(errors="replace"), re.M)
        if match:
            return match.group(1)
    for candidate in (package_dir / "version.py", package_dir / "_version.py"):
        if candidate.is_file():
            match = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""",
                              candidate.read_text(errors="replace"))
            if match:
                return match.group(1)
    pyproject = package_dir.parent / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(errors="replace"), re.M)
        if match:
            return match.group(1)
    return None


def _git_commit(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          env=child_env())
    return done.stdout.strip() or None if done.returncode == 0 else None


def _describe(path: Path, kind_hint: str, how: str) -> SourceInfo:
    found = _layout(path)
    if found is None:
        for package in (path / "python" / "sglang", path / "sglang"):
            if package.is_dir():
                raise ToolError(f"{path} looks like an SGLang source but {package.relative_to(path)}/__init__.py is "
                                "missing (a damaged or partial copy); restore it (e.g. git checkout -- "
                                f"{package.relative_to(path)}/__init__.py) or pass --sglang PATH to a complete tree")
        raise ToolError(f"{path} is not an SGLang source: no python/sglang/ (checkout) or sglang/ "
                        "(package) with __init__.py inside; pass --sglang PATH to a checkout or to "
                        "the folder that contains the sglang package")
    root, package_dir = found
    is_checkout = (root / "python" / "sglang").is_dir()
    kind = "checkout" if is_checkout else kind_hint
    lacks = [rel for rel in CHECKOUT_ONLY if not (root / rel).is_dir()]
    return SourceInfo(kind=kind, root=str(root), package_dir=str(package_dir),
                      version=_read_version(root, package_dir),
                      commit=_git_commit(root) if is_checkout else None, lacks=lacks, how=how)


def _from_python(python: str, timeout: float, notes: list[str]) -> Path | None:
    """The folder holding sglang/ for that interpreter, without importing sglang."""
    probe = ("import importlib.util, json; s = importlib.util.find_spec('sglang'); "
             "print(json.dumps(list(s.submodule_search_locations or []) if s else []))")
    try:
        done = run_grouped([python, "-c", probe], timeout=timeout)
    except OSError:
        return None  # no such interpreter: fall through to the wheel, as documented
    if done.timed_out:
        notes.append(f"the SGLang interpreter {python} did not say where sglang is within {timeout:g} s "
                     "(its process group was killed); pass --sglang PATH")
        return None
    if done.returncode != 0:
        return None
    try:
        locations = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else []
    except json.JSONDecodeError:
        return None
    return Path(locations[0]).parent if locations else None


def resolve_source(args: ResolveSourceArgs) -> SourceInfo:
    if args.path:
        path = Path(args.path).expanduser()
        if not path.exists():
            raise ToolError(f"SGLang source path {path} does not exist; pass --sglang PATH to a "
                            "checkout or package dir, or leave it out to use the PyPI wheel")
        return _describe(path.resolve(), "package", "explicit path")
    env = os.environ.get("SGLANG_SRC")
    if env:
        path = Path(env).expanduser()
        if not path.exists():
            raise ToolError(f"SGLANG_SRC={env} does not exist; fix or unset it")
        return _describe(path.resolve(), "package", "env SGLANG_SRC")
    notes: list[str] = []
    installed = _from_python(args.sglang_python, args.lookup_timeout_s, notes)
    if installed is not None:
        return _describe(installed, "package", f"sglang importable by {args.sglang_python}")
    root = ensure_wheel_source(args.version)
    info = _describe(root, "wheel", f"PyPI wheel sglang=={args.version} (cached)")
    info.notes = notes
    return info


RESOLVE_SOURCE = Tool(name="resolve_source", args=ResolveSourceArgs, run=resolve_source)
