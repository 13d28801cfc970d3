"""SGLang's server-argument fields, read statically: the one place that turns a field into its flags.

SGLang generates its command line from typed fields (``speculative_num_steps: A[Optional[int],
"help"] = None`` in ``srt/arg_groups/fields/*.py`` becomes ``--speculative-num-steps``; an
``Arg(aliases=[...])`` adds more spellings, ``Arg(no_cli=True)`` and a leading ``_`` keep a field
off the command line). Older trees declare some flags with ``parser.add_argument("--x", ...)`` in
``srt/server_args.py``; those are read too. Nothing is imported. Both the speculative flag catalog
(``spec_catalog``) and the LLM flag guard build on ``read_fields``; ``field_flag`` is the only
field -> flag conversion in the code base.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field as dc_field
from pathlib import Path

from tools.source.confine import outside
from tools.source.origin import Origin
from tools.source.pysource import parse_file
from tools.source.layout import find_package

FIELD_FILES_GLOB = "srt/arg_groups/fields/*.py"
ARGPARSE_FILE = "srt/server_args.py"


def field_flag(name: str) -> str:
    """``speculative_num_steps`` -> ``--speculative-num-steps`` (how SGLang names a field's flag)."""
    return "--" + name.replace("_", "-")


def flag_field(flag: str) -> str:
    """``--speculative-num-steps`` -> ``speculative_num_steps`` (the inverse of ``field_flag``)."""
    return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class FieldDef:
    """One server-argument field (or an argparse-only flag of an older tree)."""

    name: str
    type: str                     # the annotated type as written, e.g. "Optional[int]"
    default: str | None           # the default as written; None = no default
    help: str
    choices: tuple[str, ...]
    aliases: tuple[str, ...]      # extra CLI spellings, e.g. ("--speculative-draft-model",)
    cli: bool                     # False: not settable from the command line
    namespace: str                # the class that declares it, e.g. "Spec" ("" for add_argument)
    origin: Origin
    namespace_line: int = 0       # where that class starts

    @property
    def flags(self) -> tuple[str, ...]:
        if not self.cli:
            return ()
        primary = self.name if self.name.startswith("--") else field_flag(self.name)
        return (primary, *self.aliases)


@dataclass
class FieldCatalog:
    fields: list[FieldDef] = dc_field(default_factory=list)
    files: list[str] = dc_field(default_factory=list)   # files read, relative to the root
    damaged: list[str] = dc_field(default_factory=list)  # files that do not parse

    def by_flag(self) -> dict[str, FieldDef]:
        """Every CLI spelling -> its field; the first definition wins (as argparse would refuse a second)."""
        found: dict[str, FieldDef] = {}
        for f in self.fields:
            for flag in f.flags:
                found.setdefault(flag, f)
        return found

    def by_name(self) -> dict[str, FieldDef]:
        found: dict[str, FieldDef] = {}
        for f in self.fields:
            found.setdefault(f.name, f)
        return found


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def typed_field(stmt: ast.AnnAssign, namespace: str, rel: str, namespace_line: int = 0) -> FieldDef | None:
    """``name: A[T, "help"] = default`` or ``name: A[T, Arg(...)] = default``."""
    if not isinstance(stmt.target, ast.Name):
        return None
    name, annotation = stmt.target.id, stmt.annotation
    type_text, meta = ast.unparse(annotation), None
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) \
            and len(annotation.slice.elts) >= 2:
        type_text, meta = ast.unparse(annotation.slice.elts[0]), annotation.slice.elts[1]
    help_text, choices, aliases, cli = _string(meta) or "", (), (), not name.startswith("_")
    if isinstance(meta, ast.Call):
        help_node = _keyword(meta, "help")
        help_text = (_string(help_node) or ast.unparse(help_node)) if help_node is not None else ""
        choice_node = _keyword(meta, "choices")
        if choice_node is not None:
            choices = tuple(_string(e) or ast.unparse(e) for e in getattr(choice_node, "elts", [])) \
                or (ast.unparse(choice_node),)
        alias_node = _keyword(meta, "aliases")
        aliases = tuple(s for s in (_string(e) for e in getattr(alias_node, "elts", [])) if s and s.startswith("--"))
        no_cli = _keyword(meta, "no_cli")
        if isinstance(no_cli, ast.Constant) and no_cli.value:
            cli = False
    default = ast.unparse(stmt.value) if stmt.value is not None else None
    return FieldDef(name=name, type=type_text, default=default, help=help_text, choices=choices, aliases=aliases,
                    cli=cli, namespace=namespace, origin=Origin(path=rel, line=stmt.lineno),
                    namespace_line=namespace_line)


def _argparse_flags(call: ast.Call, rel: str) -> list[FieldDef]:
    """``parser.add_argument("--x", "--alias", ...)``: one entry per spelling, cited to the call."""
    names = [s for s in (_string(a) for a in call.args) if s and s.startswith("--")]
    help_node = _keyword(call, "help")
    default = _keyword(call, "default")
    return [FieldDef(name=n, type="", default=ast.unparse(default) if default is not None else None,
                     help=_string(help_node) or "", choices=(), aliases=(), cli=True, namespace="",
                     origin=Origin(path=rel, line=call.lineno)) for n in names]


def _read_file(path: Path, rel: str) -> list[FieldDef]:
    tree = parse_file(path)[0]
    found: list[FieldDef] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found += [f for f in (typed_field(s, node.name, rel, node.lineno) for s in node.body
                                  if isinstance(s, ast.AnnAssign)) if f]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            found += _argparse_flags(node, rel)
    return found


def field_files(package_dir: Path) -> list[Path]:
    return sorted(package_dir.glob(FIELD_FILES_GLOB)) + [package_dir / ARGPARSE_FILE]


def read_fields_at(root: Path) -> FieldCatalog:
    """The fields of the SGLang source at ``root`` (a checkout's python/sglang, or a package's sglang/)."""
    package = find_package(root)
    return read_fields(package, root) if package is not None else FieldCatalog()


def read_fields(package_dir: Path, root: Path, files: list[Path] | None = None) -> FieldCatalog:
    """Every field of the given files (default: the field modules and server_args.py), in file order."""
    catalog = FieldCatalog()
    for path in files if files is not None else field_files(package_dir):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if outside(root, path):  # a field module linked from outside the tree is not SGLang's
            catalog.damaged.append(rel)
            continue
        try:
            catalog.fields += _read_file(path, rel)
        except (SyntaxError, ValueError, OSError):
            catalog.damaged.append(rel)  # a damaged file gives no evidence: its flags stay undefined
            continue
        catalog.files.append(rel)
    return catalog
