"""Install merged configs into the folder SGLang reads: all or nothing, with backups and a manifest.

The agent-side face (validation with the agent's messages, the manifest model) of ``host_install.py``,
the stdlib-only code a remote host runs as a job. The manifest is written *before* the first file is
replaced, so a crash mid-install can be undone; uninstall restores exactly and leaves a file changed
since the install alone (reported) unless forced. Installs of the same config by several runs
stack: each is undone in any order, and undoing all restores the folder as it was before the first.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.stop import side_effect
from tools.tuning import host_install
from tools.tuning.configs import read_config_file

MANIFEST = host_install.MANIFEST


class ManifestEntry(BaseModel):
    name: str
    target: str = Field(description="Absolute, resolved path SGLang will read")
    source: str = Field(description="Merged file that was installed")
    sha256: str = Field(description="Hash of what we installed")
    backup: str | None = Field(None, description="Run-relative copy of the file we replaced, if any")


class Manifest(BaseModel):
    version: int = 1
    state: str = Field(description="installing | installed | rolled_back | uninstalled")
    config_dir: str
    created_at: float
    entries: list[ManifestEntry]
    notes: list[str] = Field(default_factory=list)
    installed_by: str = Field("local", description="Where the targets are: 'local' or the executor (e.g. "
                              "ssh://host) whose host the install ran on (tools/tuning/remote_install.py)")


def load_manifest(path: Path) -> Manifest:
    try:
        return Manifest.model_validate_json(Path(path).read_text())
    except FileNotFoundError:
        raise ToolError(f"no install manifest at {path}: this run installed no kernel configs") from None
    except ValueError as err:  # pydantic's ValidationError: damaged or crafted, one line and no traceback
        raise ToolError(f"{path} is not an install manifest ({str(err).splitlines()[0]}); restore it from the run's "
                        "copy, or undo the install by hand") from None


def install_configs(merged: list[Path], config_dir: Path, run_dir: Path) -> Manifest:
    """Copy every merged file into ``config_dir`` or none of them (the host script's own install)."""
    for path in merged:
        read_config_file(path)  # the agent's validation, with its messages, before anything is touched
    try:
        with side_effect(f"installing {len(merged)} tuned configs into {config_dir}") as began_at:
            # began_at (when the gate let it through) is the manifest's created_at
            host_install.install(argparse.Namespace(
                run=str(run_dir), installed_by="local", config_dir=str(config_dir), sglang_python=None,
                sglang_src=None, merged=[str(p) for p in merged], began_at=began_at))
    except host_install.Problem as err:
        raise ToolError(str(err)) from None
    return load_manifest(Path(run_dir) / MANIFEST)


class UninstallResult(BaseModel):
    restored: list[str] = Field(default_factory=list, description="Targets put back from backups")
    removed: list[str] = Field(default_factory=list, description="Targets we had added, now deleted")
    released: list[str] = Field(default_factory=list, description="Targets a later run's install holds: kept, and "
                                "put back to what they held before this run when that one is uninstalled")
    left_alone: list[str] = Field(default_factory=list, description="Targets changed since install (not touched; "
                                  "--force puts them back)")
    not_ours: list[str] = Field(default_factory=list, description="Targets with no record of ours, or outside the "
                                "config folder (not touched, even with --force)")
    note: str = ""


def uninstall_configs(run_dir: Path, force: bool = False) -> UninstallResult:
    load_manifest(Path(run_dir) / MANIFEST)  # a run without an install: say so in the agent's words
    try:
        result = host_install.uninstall(argparse.Namespace(run=str(run_dir), force=force))
    except host_install.Problem as err:
        raise ToolError(str(err)) from None
    return UninstallResult.model_validate(result)


class UninstallArgs(BaseModel):
    """Undo a run's kernel-config install: restore replaced files from backups, remove added ones."""

    run_dir: str = Field(description="The run folder whose tuning/manifest.json to undo")
    force: bool = Field(False, description="Also restore files changed since the install")


UNINSTALL_CONFIGS = Tool(name="uninstall_kernel_configs", args=UninstallArgs,
                         run=lambda a: uninstall_configs(Path(a.run_dir), a.force))

