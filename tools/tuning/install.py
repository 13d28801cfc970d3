"""Install merged configs into the folder SGLang reads: all or nothing, with backups and a manifest.

The manifest (``tuning/manifest.json`` in the run folder) is written *before* the first file is
replaced, so a crash mid-install can still be undone. Uninstall restores exactly: replaced files
come back from their backups, new files are removed, and a file changed since we installed it is
left alone (reported) unless forced.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.tuning.configs import read_config_file

MANIFEST = "tuning/manifest.json"
BACKUP_DIR = "tuning/backup"


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _save(run_dir: Path, manifest: Manifest) -> Path:
    path = run_dir / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".manifest.json.tmp")
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)
    return path


def load_manifest(path: Path) -> Manifest:
    try:
        return Manifest.model_validate_json(Path(path).read_text())
    except FileNotFoundError:
        raise ToolError(f"no install manifest at {path}: this run installed no kernel configs") from None


def _replace(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.dsv4-tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def install_configs(merged: list[Path], config_dir: Path, run_dir: Path) -> Manifest:
    """Copy every merged file into ``config_dir`` or none of them."""
    config_dir = Path(config_dir).resolve()
    for path in merged:
        read_config_file(path)  # validate everything before touching anything
    if not config_dir.is_dir():
        raise ToolError(f"SGLang config folder {config_dir} does not exist; check --sglang-src / --sglang-python "
                        "point at the SGLang the server runs")
    if not os.access(config_dir, os.W_OK | os.X_OK):
        raise ToolError(f"cannot write to SGLang's config folder {config_dir}; run as a user who owns that SGLang "
                        "install (or use a venv/checkout you own), then re-run — nothing was installed")
    entries = []
    for path in merged:
        target = config_dir / path.name
        backup = None
        if target.exists() or target.is_symlink():
            if not target.is_file():
                raise ToolError(f"{target} exists but is not a regular file; move it away and re-run — nothing was "
                                "installed")
            backup = f"{BACKUP_DIR}/{path.name}"
            try:
                (run_dir / BACKUP_DIR).mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, run_dir / backup)
            except OSError as err:
                raise ToolError(f"could not back up {target} into {run_dir / BACKUP_DIR} ({err.strerror or err}); "
                                "free space or fix permissions of the run folder — nothing was installed") from None
        entries.append(ManifestEntry(name=path.name, target=str(target), source=str(path),
                                     sha256=_sha256(path), backup=backup))
    manifest = Manifest(state="installing", config_dir=str(config_dir), created_at=time.time(), entries=entries)
    _save(run_dir, manifest)
    done: list[ManifestEntry] = []
    try:
        for entry in entries:
            _replace(Path(entry.source), Path(entry.target))
            done.append(entry)
    except OSError as err:
        failed = entries[len(done)]
        for entry in reversed(done):
            _restore(entry, run_dir)
        manifest.state = "rolled_back"
        manifest.notes.append(f"install failed at {failed.name}: {err}; the {len(done)} files already written "
                              "were restored")
        _save(run_dir, manifest)
        raise ToolError(f"could not install {failed.name} into {config_dir} ({err.strerror or err}); rolled back "
                        f"the {len(done)} files already written, nothing is installed. Fix the folder and re-run") from None
    manifest.state = "installed"
    _save(run_dir, manifest)
    return manifest


def _restore(entry: ManifestEntry, run_dir: Path) -> None:
    target = Path(entry.target)
    if entry.backup:
        _replace(run_dir / entry.backup, target)
    else:
        target.unlink(missing_ok=True)


class UninstallResult(BaseModel):
    restored: list[str] = Field(default_factory=list, description="Targets put back from backups")
    removed: list[str] = Field(default_factory=list, description="Targets we had added, now deleted")
    left_alone: list[str] = Field(default_factory=list, description="Targets changed since install (not touched)")
    note: str = ""


def uninstall_configs(run_dir: Path, force: bool = False) -> UninstallResult:
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir / MANIFEST)
    if manifest.state in ("uninstalled", "rolled_back"):
        return UninstallResult(note=f"nothing to do: the install is already {manifest.state.replace('_', ' ')}")
    result = UninstallResult()
    for entry in manifest.entries:
        target = Path(entry.target)
        current = _sha256(target) if target.exists() else None
        if manifest.state == "installing" and current != entry.sha256:
            continue  # the install crashed before this file was written: the original is still there
        if current != entry.sha256 and not force:
            result.left_alone.append(entry.target)
            continue
        _restore(entry, run_dir)
        (result.restored if entry.backup else result.removed).append(entry.target)
    if result.left_alone:
        result.note = (f"{len(result.left_alone)} files changed since this run installed them and were left alone; "
                       "`dsv4-agent tuning uninstall RUN --force` restores them anyway")
        manifest.notes.append(result.note)
    else:
        manifest.state = "uninstalled"
    _save(run_dir, manifest)
    return result


class UninstallArgs(BaseModel):
    """Undo a run's kernel-config install: restore replaced files from backups, remove added ones."""

    run_dir: str = Field(description="The run folder whose tuning/manifest.json to undo")
    force: bool = Field(False, description="Also restore files changed since the install")


UNINSTALL_CONFIGS = Tool(name="uninstall_kernel_configs", args=UninstallArgs,
                         run=lambda a: uninstall_configs(Path(a.run_dir), a.force))

