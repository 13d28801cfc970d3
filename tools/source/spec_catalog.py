"""The catalog of speculative-decoding flags: the ``speculative_*`` fields of SGLang's ``Spec`` namespace.

The flags are generated from typed fields (see ``tools/source/fields.py``, which reads them), so the
flag strings never appear where they are defined. We take the first file of ``SPEC_FILES`` whose
classes declare ``speculative_*`` fields: ``srt/arg_groups/fields/spec.py`` today, the fields of
``ServerArgs`` in ``srt/server_args.py`` in older trees.
"""
from __future__ import annotations

from itertools import groupby
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.source.fields import FieldDef, field_flag, read_fields
from tools.source.origin import Origin

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


def _entry(f: FieldDef) -> SpecFlag:
    return SpecFlag(flag=field_flag(f.name), field=f.name, type=f.type, default=f.default, help=f.help,
                    choices=list(f.choices), aliases=list(f.aliases), cli=f.cli, origin=f.origin)


def spec_catalog(args: SpecCatalogArgs) -> SpecCatalog:
    package, root = Path(args.package_dir), Path(args.root)
    for candidate in SPEC_FILES:
        path = package / candidate
        if not path.is_file():
            continue
        catalog = read_fields(package, root, files=[path])
        if catalog.damaged:
            raise ToolError(f"{path} does not parse; the SGLang tree is damaged: re-resolve the source")
        typed = [f for f in catalog.fields if f.namespace]  # argparse-only entries have no field
        for namespace, group in groupby(typed, key=lambda f: (f.namespace, f.namespace_line)):
            fields = list(group)
            spec = [f for f in fields if f.name.startswith("speculative_")]
            if spec:
                return SpecCatalog(flags=[_entry(f) for f in (fields if args.all_fields else spec)],
                                   source_class=namespace[0],
                                   origin=Origin(path=fields[0].origin.path, line=fields[0].namespace_line))
    raise ToolError(f"no speculative_* fields found in {', '.join(SPEC_FILES)} under {package}; "
                    "this SGLang version keeps its flags elsewhere: search for 'speculative_num_steps'")


SPEC_CATALOG = Tool(name="spec_catalog", args=SpecCatalogArgs, run=spec_catalog)
