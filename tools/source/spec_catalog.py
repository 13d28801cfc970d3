"""The catalog of speculative-decoding flags, read from the ``Spec`` fields.

SGLang generates its CLI from typed fields (``speculative_num_steps: A[Optional[int], "help"] = None``
becomes ``--speculative-num-steps``), so the flag strings never appear where they are defined.
We read the field declarations statically (AST, nothing imported) from
``srt/arg_groups/fields/spec.py``; older trees that define the fields on ``ServerArgs`` in
``srt/server_args.py`` are read the same way.
"""
from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.source.origin import Origin
from tools.source.pysource import parse_file

SPEC_FILES = ("srt/arg_groups/fields/spec.py", "srt/server_args.py")


class SpecCatalogArgs(BaseModel):
    """List every --speculative-* server flag with its type, default and help, cited to its field."""

    package_dir: str = Field(description="The resolved sglang/ package folder")
    root: str = Field(description="The source root; cited paths are relative to it")
    all_fields: bool = Field(False, description="Also list non-speculative fields of the Spec namespace")


class SpecFlag(BaseModel):
    flag: str = Field(description="CLI flag, e.g. --speculative-num-steps")
    field: str
    type: str = Field(description="The annotated type as written, e.g. Optional[int]")
    default: str | None = Field(description="The default as written in the source; None = required/no default")
    help: str = ""
    choices: list[str] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    cli: bool = Field(True, description="False for fields marked no_cli (not settable from the command line)")
    origin: Origin


class SpecCatalog(BaseModel):
    flags: list[SpecFlag]
    source_class: str = Field(description="The class the fields were read from, e.g. Spec")
    origin: Origin


def _string(node: ast.AST) -> str | None:
    """A literal string, including implicit concatenation (one Constant after parsing)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _field(stmt: ast.AnnAssign, rel: str) -> SpecFlag | None:
    if not isinstance(stmt.target, ast.Name):
        return None
    name = stmt.target.id
    annotation = stmt.annotation
    type_text, meta = ast.unparse(annotation), None
    # A[T, "help"] or A[T, Arg(...)]: Subscript whose slice is a tuple (T, meta)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) \
            and len(annotation.slice.elts) >= 2:
        type_text = ast.unparse(annotation.slice.elts[0])
        meta = annotation.slice.elts[1]
    help_text, choices, aliases, cli = "", [], [], True
    if meta is not None and _string(meta) is not None:
        help_text = _string(meta) or ""
    elif isinstance(meta, ast.Call):
        for kw in meta.keywords:
            if kw.arg == "help":
                help_text = _string(kw.value) or ast.unparse(kw.value)
            elif kw.arg == "choices":
                choices = [(_string(e) or ast.unparse(e)) for e in getattr(kw.value, "elts", [])] \
                    or [ast.unparse(kw.value)]
            elif kw.arg == "aliases":
                aliases = [s for s in (_string(e) for e in getattr(kw.value, "elts", [])) if s]
            elif kw.arg == "no_cli" and isinstance(kw.value, ast.Constant):
                cli = not bool(kw.value.value)
    if name.startswith("_"):
        cli = False
    default = ast.unparse(stmt.value) if stmt.value is not None else None
    return SpecFlag(flag="--" + name.replace("_", "-"), field=name, type=type_text, default=default,
                    help=help_text, choices=choices, aliases=aliases, cli=cli,
                    origin=Origin(path=rel, line=stmt.lineno))


def spec_catalog(args: SpecCatalogArgs) -> SpecCatalog:
    package = Path(args.package_dir)
    root = Path(args.root)
    for candidate in SPEC_FILES:
        path = package / candidate
        if not path.is_file():
            continue
        try:
            tree = parse_file(path)[0]
        except SyntaxError as err:
            raise ToolError(f"{path} does not parse ({err.msg}, line {err.lineno}); "
                            "the SGLang tree is damaged: re-resolve the source") from None
        rel = path.relative_to(root).as_posix()
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = [f for f in (_field(s, rel) for s in node.body if isinstance(s, ast.AnnAssign)) if f]
            spec = [f for f in fields if f.field.startswith("speculative_")]
            if not spec:
                continue
            return SpecCatalog(flags=fields if args.all_fields else spec, source_class=node.name,
                               origin=Origin(path=rel, line=node.lineno))
    raise ToolError(f"no speculative_* fields found in {', '.join(SPEC_FILES)} under {package}; "
                    "this SGLang version keeps its flags elsewhere: search for 'speculative_num_steps'")


SPEC_CATALOG = Tool(name="spec_catalog", args=SpecCatalogArgs, run=spec_catalog)
