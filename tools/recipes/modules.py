"""A lazily parsed index of the Python modules of an SGLang tree (AST only, nothing imported).

Test files reach their values through imports (``from sglang.test.test_utils import X``),
relative imports and base classes in other files; this index maps dotted names and relative
imports to files and keeps one parse per file. A file that does not parse is remembered as a
warning and treated as empty, never a crash.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.source.confine import outside
from tools.source.pysource import LineIndex, parse_file

# a server-launch call is one whose name says so (launch_server, popen_launch_server, ...), or the
# settings object nightly tests hand to their runners (ModelLaunchSettings(model, extra_args=...))
LAUNCHER = re.compile(r"launch\w*server|server\w*launch|launch\w*settings", re.I)


@dataclass
class ClassInfo:
    name: str
    node: ast.ClassDef
    module: "ParsedModule"
    attrs: dict[str, ast.expr] = field(default_factory=dict)   # class-body assignments
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)


@dataclass
class ParsedModule:
    path: Path
    rel: str                                   # relative to the source root, for citations
    tree: ast.Module
    constants: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)  # alias -> (module, name, level)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    launch_lines: LineIndex | None = None      # lines naming a launcher: skips walks of code without one
    launch_calls: dict[int, list[ast.Call]] = field(default_factory=dict)  # id(node) -> its launcher calls
    all_launches: list[ast.Call] | None = None  # every launcher call of the module, in source order


def _assigned(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """The plain names a statement assigns (``X = ...``, ``X: T = ...``) with the value expression."""
    if isinstance(stmt, ast.Assign):
        return [(t.id, stmt.value) for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [(stmt.target.id, stmt.value)]
    return []


def _collect(module: ParsedModule) -> None:
    for stmt in module.tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            module.constants.update(_assigned(stmt))
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                module.imports[alias.asname or alias.name] = (stmt.module or "", alias.name, stmt.level)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                module.imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0], None, 0)
        elif isinstance(stmt, ast.ClassDef):
            info = ClassInfo(stmt.name, stmt, module)
            for item in stmt.body:
                if isinstance(item, (ast.Assign, ast.AnnAssign)):
                    info.attrs.update(_assigned(item))
                elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods[item.name] = item  # type: ignore[assignment]
            module.classes[stmt.name] = info
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module.functions[stmt.name] = stmt  # type: ignore[assignment]


class ModuleIndex:
    def __init__(self, root: Path, import_root: Path):
        self.root = root                 # citations are relative to this
        self.import_root = import_root   # the folder that contains sglang/
        self._parsed: dict[Path, ParsedModule | None] = {}
        self._resolved: dict[Path, Path] = {}  # path as asked -> resolved (resolving costs a stat per part)
        self.warnings: list[str] = []

    def parse(self, path: Path) -> ParsedModule | None:
        asked = path
        path = self._resolved.get(asked) or self._resolved.setdefault(asked, asked.resolve())
        if path in self._parsed:
            return self._parsed[path]
        module = None
        if outside(self.root, path):  # a symlinked module (or a folder link) pointing out of the tree
            self.warnings.append(f"{self._rel(asked)}: skipped, it resolves outside the source root (a symlink); "
                                 "nothing outside the tree is read")
            self._parsed[path] = None
            return None
        try:
            tree, text = parse_file(path)
            module = ParsedModule(path, self._rel(path), tree, launch_lines=LineIndex(text, LAUNCHER))
            _collect(module)
        except SyntaxError as err:
            self.warnings.append(f"{self._rel(path)}: skipped, does not parse ({err.msg}, line {err.lineno})")
        except (OSError, ValueError) as err:
            self.warnings.append(f"{self._rel(path)}: skipped, {err}")
        self._parsed[path] = module
        return module

    def _rel(self, path: Path) -> str:
        for base in (self.root.resolve(), self.root):
            try:
                return path.relative_to(base).as_posix()
            except ValueError:
                continue
        return path.as_posix()

    def resolve_module(self, name: str, level: int, importer: ParsedModule) -> ParsedModule | None:
        """The module that ``from <level dots><name> import ...`` refers to, if it is in the tree."""
        if level:
            base = importer.path.parent
            for _ in range(level - 1):
                base = base.parent
            parts = name.split(".") if name else []
        else:
            base, parts = self.import_root, name.split(".")
        target = base.joinpath(*parts) if parts else base
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                return self.parse(candidate)
        return None
