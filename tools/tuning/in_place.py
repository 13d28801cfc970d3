"""The kernel configs earlier runs installed that SGLang reads now: a baseline measured with them in
place is not SGLang's default, and its report has to say so (issue 40 item 7).

The folder is the one the server's SGLang reads (where ``--sglang-python`` imports sglang from, else
the source tree), the same rule the install follows; the installs are the agent's own records in
the state folder (tools/tuning/host_rules.py), never a run folder's manifest.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.source.resolve import cache_dir
from tools.tuning import host_rules
from tools.tuning.configs import find_config_dir, installed_package_parent


class InPlaceArgs(BaseModel):
    sglang_python: str = Field(description="The interpreter that runs the server")
    sglang_root: str | None = Field(None, description="The SGLang source tree, where the interpreter has no sglang")


class InstalledConfig(BaseModel):
    name: str = Field(description="The config file's name in SGLang's config folder")
    run: str = Field(description="The run folder's name that installed it")
    installed_at: float | None = Field(None, description="When (seconds since the epoch)")


class InPlaceResult(BaseModel):
    config_dir: str | None = Field(None, description="The folder the server's SGLang reads configs from")
    configs: list[InstalledConfig] = Field(default_factory=list, description="Installed by a run of ours, in place")
    note: str | None = Field(None, description="Why the folder or the records could not be read")

    def by_others(self, run_name: str) -> list[InstalledConfig]:
        """Those another run installed (a resumed run finds its own install in place too)."""
        return [c for c in self.configs if c.run != run_name]


def is_our_corpus(root: str | Path | None) -> bool:
    """Our cached wheel corpus is read for evidence but is never what a server runs."""
    return root is not None and Path(root).resolve().is_relative_to(cache_dir().resolve())


def server_config_dir(sglang_python: str, sglang_root: str | None) -> Path:
    """The config folder of the SGLang the server runs: where ``sglang_python`` imports sglang from,
    else the source tree ``sglang_root`` (the install's target and the folder the baseline reads)."""
    parent = installed_package_parent(sglang_python)
    if parent is not None:
        return find_config_dir(parent)
    if sglang_root is not None and not is_our_corpus(sglang_root):
        return find_config_dir(Path(sglang_root))
    raise ToolError(f"{sglang_python} has no sglang, so the folder the server reads configs from is "
                    "unknown; pass --sglang-python to the interpreter that runs the server")


def configs_in_place(args: InPlaceArgs) -> InPlaceResult:
    try:
        folder = server_config_dir(args.sglang_python, args.sglang_root)
        found = host_rules.installs_in(folder)
    except (ToolError, host_rules.Problem, OSError) as err:
        return InPlaceResult(note=f"kernel configs in place not read: {err}")
    configs = [InstalledConfig(name=Path(f["target"]).name, run=Path(f["run"]).name,
                               installed_at=f["installed_at"] if isinstance(f["installed_at"], (int, float)) else None)
               for f in found]
    return InPlaceResult(config_dir=str(folder), configs=configs)
