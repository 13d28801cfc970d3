"""Vetting a recipe's environment before it reaches a serve script.

A test file's ``env=`` may hold anything: ``LD_PRELOAD``, ``PYTHONPATH``, a fault-injection knob.
A variable is kept only when SGLang reads it or it is a CUDA/NCCL/DeepEP (NVSHMEM) setting:

- defined in SGLang's environment registry (``class Envs`` in ``srt/environ.py``), unless the
  registry files it under a test or fault-injection section, or lists it as deprecated;
- read by SGLang's own code as a literal name (``os.environ.get("X")``, ``os.getenv("X")``,
  ``get_bool_env_var("X")``, ...) outside its test folders;
- named like a CUDA, NCCL, NVSHMEM or DeepEP setting (``CUDA_VISIBLE_DEVICES`` excepted: the
  scripts set the GPUs themselves).

Everything else is dropped and listed with where the recipe set it and why.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from tools.mtp.answer import Dropped
from tools.source.origin import Origin
from tools.source.pysource import parse_file
from tools.source.search import SearchArgs, search

REGISTRY = "srt/environ.py"
FAMILIES = ("CUDA_", "NCCL_", "TORCH_NCCL_", "NVSHMEM_", "DEEPEP_", "DEEP_EP_")
RESERVED = frozenset({"CUDA_VISIBLE_DEVICES"})
_SECRET = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|KEY)$", re.I)
_SECTION = re.compile(r"^\s*#\s*={5,}\s*$")
_TEST_SECTION = re.compile(r"\btest(s|ing)?\b|fault injection", re.I)
_READ = r"(os\.environ(\.get)?\s*[\(\[]|os\.getenv\s*\(|get_\w*env\w*\s*\()\s*['\"]({names})['\"]"


def redacted(env: dict[str, str]) -> dict[str, str]:
    """The env with credential values hidden (for anything written to a run folder or printed)."""
    return {k: "<redacted>" if _SECRET.search(k) else v for k, v in env.items()}


class Registry:
    """``srt/environ.py``: name -> (line, section title) of every registered variable, and the deprecated ones."""

    def __init__(self, package_dir: Path, root: Path):
        self.path = package_dir / REGISTRY
        self.rel = self.path.relative_to(root).as_posix() if self.path.is_file() else None
        self.entries: dict[str, tuple[int, str]] = {}
        self.deprecated: dict[str, int] = {}
        if self.rel is not None:
            try:
                self._read()
            except (SyntaxError, ValueError, OSError):
                self.rel = None  # a damaged registry gives no evidence: variables must be read elsewhere

    def _read(self) -> None:
        tree, text = parse_file(self.path)
        lines = text.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "Envs":
                for stmt in node.body:
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
                    if isinstance(target, ast.Name) and target.id.isupper():
                        self.entries[target.id] = (stmt.lineno, _section(lines, stmt.lineno))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict) \
                    and "DEPRECATED" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target):
                for key in node.value.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        self.deprecated[key.value] = key.lineno


def _section(lines: list[str], line: int) -> str:
    """The title of the ``# ====`` / ``# Title`` / ``# ====`` block above a line, '' if none."""
    for number in range(line - 1, 1, -1):
        if _SECTION.match(lines[number - 1]) and number >= 3 and _SECTION.match(lines[number - 3]):
            return lines[number - 2].strip().lstrip("#").strip()
    return ""


@lru_cache(maxsize=16)
def _registry(package_dir: str, root: str) -> Registry:
    return Registry(Path(package_dir), Path(root))


def _reads(names: list[str], package_dir: Path, root: Path) -> dict[str, str]:
    """name -> 'path:line' where SGLang's code (not its tests) reads it by its literal name."""
    if not names:
        return {}
    pattern = _READ.format(names="|".join(re.escape(n) for n in names))
    hits = search(SearchArgs(pattern=pattern, root=str(package_dir), glob=["*.py"], max_hits=500)).hits
    hits = [h for h in hits if not {"test", "tests"} & set(h.path.split("/")[:-1])]
    base = package_dir.relative_to(root).as_posix()
    found: dict[str, str] = {}
    for hit in hits:
        match = re.search(pattern, hit.text)
        if match:
            found.setdefault(match.group(3), f"{base}/{hit.path}:{hit.line}")
    return found


class EnvVetter:
    """Vets the environments of many recipes with one registry read and one search of SGLang's code."""

    def __init__(self, package_dir: Path, root: Path, names: set[str]):
        self.registry = _registry(str(package_dir), str(root))
        unknown = sorted(n for n in names if n not in self.registry.entries and n not in self.registry.deprecated
                         and not n.startswith(FAMILIES) and not _SECRET.search(n) and n not in RESERVED)
        self.reads = _reads(unknown, package_dir, root)

    def vet(self, env: dict[str, str], origins: dict[str, Origin],
            recipe: str) -> tuple[dict[str, str], dict[str, str], list[Dropped]]:
        """(kept env, why each is kept, dropped) for one recipe's environment."""
        kept: dict[str, str] = {}
        evidence: dict[str, str] = {}
        dropped: list[Dropped] = []
        for name, value in env.items():
            why = self._kept_because(name)
            if isinstance(why, Dropped):
                dropped.append(why.model_copy(update={"value": value if why.value == "" else why.value,
                                                      "origin": origins.get(name)}))
            else:
                kept[name], evidence[name] = value, why
        for d in dropped:
            d.reason = d.reason.replace("{recipe}", recipe)
        return kept, evidence, dropped

    def _kept_because(self, name: str) -> str | Dropped:
        registry = self.registry

        def drop(reason: str, value: str = "") -> Dropped:
            return Dropped(kind="env", name=name, value=value, origin=None, reason=reason)

        if _SECRET.search(name):
            return drop("a credential: never written into scripts or run folders", "<redacted>")
        if name in RESERVED:
            return drop("set by the scripts themselves (--gpus); {recipe} chose it for its CI runner")
        if name in registry.deprecated:
            return drop(f"SGLang lists it as deprecated ({registry.rel}:{registry.deprecated[name]})")
        if name in registry.entries:
            line, section = registry.entries[name]
            if _TEST_SECTION.search(section):
                return drop(f"a test-only setting: SGLang defines it under '{section}' ({registry.rel}:{line})")
            return f"defined by SGLang at {registry.rel}:{line}"
        if name.startswith(FAMILIES):
            return "a CUDA/NCCL/NVSHMEM/DeepEP setting"
        if name in self.reads:
            return f"read by SGLang at {self.reads[name]}"
        where = f"not in {registry.rel}" if registry.rel else "SGLang has no environment registry here"
        return drop(f"SGLang does not read it ({where}, and no os.environ/getenv read of it outside its tests)")
