"""A run folder as one portable ``.tar.gz``: planned here, resumed on a GPU host that shares nothing with
this machine (docs/workflow.md).

``make_bundle`` packs what the run needs to go on, with a manifest of sizes and SHA-256; it refuses
a run being driven or one with jobs (their ledger names this machine's processes). ``unpack_bundle``
treats the archive as untrusted: regular files and folders only, inside one run folder, no absolute
path, ``..`` or link, sizes capped, each file checked against the manifest and written with
``O_EXCL | O_NOFOLLOW`` into a temporary folder renamed into place. Unpacked again, a bundle finds
its own run; any other run of that name is left alone.
"""
from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import re
import shutil
import socket
import stat
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.run.tar_bounds import TarRefused, check_headers
from agent.run.folder import RunFolder, RunFolderError

MANIFEST = "bundle.json"
FORMAT = 1
SUFFIX = ".tar.gz"
RUN_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[a-z0-9][a-z0-9-]{0,60}$")
LEFT_OUT = {".lock"}  # the agent's lock on this machine
MAX_FILES = 20_000
MAX_BYTES = 2 << 30  # a planned run is well under a megabyte; a measured one holds logs and plots


class BundleError(Exception):
    """A run that cannot be bundled, or an archive that is not a bundle to trust; the message says why."""


@dataclass
class Bundle:
    path: Path
    run: str
    files: int
    bytes: int


def _files_of(run: Path) -> list[Path]:
    out = []
    for path in sorted(run.rglob("*")):
        relative = path.relative_to(run)
        if path.is_symlink():
            raise BundleError(f"{run.name}/{relative} is a link; a bundle carries only the run's own files")
        if path.is_dir() or relative.as_posix() in LEFT_OUT or relative.name.startswith(".") and ".tmp" in relative.name:
            continue  # folders come with their files; a temporary file is a write that never finished
        if not path.is_file():
            raise BundleError(f"{run.name}/{relative} is not a regular file")
        out.append(path)
    return out


def _jobs_of(run: Path) -> list[str]:
    jobs = run / "jobs"
    return sorted(p.name for p in jobs.iterdir() if p.is_dir()) if jobs.is_dir() else []


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def make_bundle(run: RunFolder, output: Path, extra: dict[str, bytes] | None = None) -> Bundle:
    """Write ``output`` (atomically) holding ``run`` and the ``extra`` files (run-relative name: bytes, in the
    archive only); BundleError when the run cannot travel."""
    extra = extra or {}
    jobs = _jobs_of(run.path)
    if jobs:
        finished = (run.result or {}).get("status") == "finished"
        where = (f"it finished: its report is {run.path / 'report.html'}" if finished else
                 f"resume it where its jobs are: dsv4-agent resume {run.path}")
        raise BundleError(f"run {run.path.name} has jobs ({', '.join(jobs[:3])}{', …' if len(jobs) > 3 else ''}) "
                          "started through this machine's executor, which another host cannot re-attach to; a bundle "
                          f"carries a run whose GPU jobs have not started (planned); {where}")
    try:
        run.lock()  # not while an agent drives it: its files would be caught half-way
    except RunFolderError as err:
        raise BundleError(str(err)) from None
    try:
        files = [p for p in _files_of(run.path) if p.relative_to(run.path).as_posix() not in extra]
        listed = {p.relative_to(run.path).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in files}
        listed |= {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in extra.items()}
        manifest = {"format": FORMAT, "run": run.path.name, "made_at": time.time(), "made_on": socket.gethostname(),
                    "made_from": str(run.path.resolve()), "files": listed}
        _write_archive(run.path, files, manifest, output, extra)
    finally:
        run.unlock()
    return Bundle(path=output, run=run.path.name, files=len(listed), bytes=output.stat().st_size)


def _member(name: str, size: int, mode: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, int(mtime)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_archive(run: Path, files: list[Path], manifest: dict, output: Path, extra: dict[str, bytes]) -> None:
    _drop_stale_tmp(output)
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    try:
        with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            top = tarfile.TarInfo(run.name)
            top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
            tar.addfile(top)
            data = (json.dumps(manifest, indent=2) + "\n").encode()
            tar.addfile(_member(f"{run.name}/{MANIFEST}", len(data), 0o644, time.time()), io.BytesIO(data))
            for path in files:
                st = path.stat()
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                with open(path, "rb") as f:
                    tar.addfile(_member(f"{run.name}/{path.relative_to(run).as_posix()}", st.st_size, mode,
                                        st.st_mtime), f)
            for name, data in extra.items():
                tar.addfile(_member(f"{run.name}/{name}", len(data), 0o644, time.time()), io.BytesIO(data))
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)


def _drop_stale_tmp(output: Path) -> None:
    """Remove what a bundle killed while writing ``output`` left (``.NAME.tmpPID`` of a process gone)."""
    for stale in output.parent.glob(f".{glob.escape(output.name)}.tmp*"):
        pid = stale.name.rsplit(".tmp", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and stale.is_file() and not stale.is_symlink():
            stale.unlink(missing_ok=True)


def _checked_name(member: tarfile.TarInfo, top: str | None) -> PurePosixPath:
    name = member.name
    path = PurePosixPath(name)
    if not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in name.rstrip("/").split("/")):
        raise BundleError(f"archive member {name!r} is not a plain relative path inside the run folder")
    if top is not None and path.parts[0] != top:
        raise BundleError(f"archive member {name!r} lies outside the run folder {top}/")
    return path


def _kind(member: tarfile.TarInfo) -> str:
    if member.isreg():
        return "file"
    if member.isdir():
        return "folder"
    what = ("a symbolic link" if member.issym() else "a hard link" if member.islnk() else
            "a device" if member.ischr() or member.isblk() else "a FIFO" if member.isfifo() else "not a regular file")
    raise BundleError(f"archive member {member.name!r} is {what}; a bundle holds only files and folders")


def unpack_bundle(archive: Path, runs_dir: Path) -> tuple[Path, bool]:
    """The run folder ``archive`` holds, unpacked under ``runs_dir`` (True), or found there from an
    earlier unpacking of the same bundle (False). BundleError for anything that is not a sound bundle."""
    try:
        check_headers(archive, MAX_BYTES)  # before tarfile reads any of them whole
    except TarRefused as err:
        raise BundleError(f"{archive} {err}: not a bundle made by `dsv4-agent bundle`") from None
    with _open(archive) as tar:
        try:
            members = _members(tar)
            name, manifest = _manifest(tar, members)
        except (OSError, tarfile.TarError, EOFError, zlib.error) as err:
            raise BundleError(f"{archive} is damaged ({err}); copy it again") from None
        target = runs_dir / name
        if target.exists():
            return _same_bundle(target, manifest, archive), False
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise BundleError(f"cannot create runs dir {runs_dir}: {err.strerror}; pass --runs-dir DIR") from None
        staging = runs_dir / f".unpacking-{name}-{os.getpid()}"
        try:
            _extract(tar, members, manifest, staging)
            os.rename(staging / name, target)
        except (OSError, tarfile.TarError, EOFError, zlib.error) as err:
            raise BundleError(f"cannot unpack {archive} into {runs_dir}: {err}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target, True


def _open(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, "r:gz")
    except (OSError, tarfile.TarError, EOFError) as err:
        raise BundleError(f"{archive} is not a bundle made by `dsv4-agent bundle` (not a readable .tar.gz: {err})") \
            from None


def _members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members: list[tarfile.TarInfo] = []
    total = 0
    top: str | None = None
    seen: set[str] = set()
    for member in tar:
        _kind(member)
        path = _checked_name(member, top)
        top = top or path.parts[0]
        if not RUN_NAME.match(top):
            raise BundleError(f"archive folder {top!r} is not a run folder's name (<UTC time>-<slug>)")
        key = path.as_posix()
        if key in seen:
            raise BundleError(f"archive member {key!r} appears twice")
        seen.add(key)
        total += member.size
        members.append(member)
        if len(members) > MAX_FILES or total > MAX_BYTES:
            raise BundleError(f"the archive holds more than {MAX_FILES} files or {MAX_BYTES >> 30} GiB: not a bundle")
    if top is None:
        raise BundleError("the archive is empty")
    return members


def _manifest(tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> tuple[str, dict]:
    name = PurePosixPath(members[0].name).parts[0]
    entry = next((m for m in members if m.name == f"{name}/{MANIFEST}" and m.isreg()), None)
    if entry is None:
        raise BundleError(f"the archive has no {name}/{MANIFEST}: not made by `dsv4-agent bundle`")
    reader = tar.extractfile(entry)
    try:
        manifest = json.loads(reader.read(1 << 24)) if reader else None
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("run") != name \
            or not isinstance(manifest.get("files"), dict):
        raise BundleError(f"{name}/{MANIFEST} is not a bundle manifest of format {FORMAT} for run {name}")
    files = {m.name.split("/", 1)[1] for m in members if m.isreg() and m.name != entry.name}
    if files != set(manifest["files"]):
        extra, lacking = sorted(files - set(manifest["files"])), sorted(set(manifest["files"]) - files)
        raise BundleError(f"the archive's files differ from its manifest (not listed: {extra[:3]}; missing: "
                          f"{lacking[:3]}); make the bundle again")
    return name, manifest


def _extract(tar: tarfile.TarFile, members: list[tarfile.TarInfo], manifest: dict, staging: Path) -> None:
    staging.mkdir(mode=0o700)
    for member in members:
        dest = staging.joinpath(*PurePosixPath(member.name).parts)
        if member.isdir():
            dest.mkdir(mode=0o755, parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        relative = member.name.split("/", 1)[1]
        want = manifest["files"].get(relative)  # None only for the manifest itself
        mode = 0o755 if member.mode & 0o111 else 0o644  # never setuid, setgid or sticky
        source = tar.extractfile(member)
        digest = hashlib.sha256()
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as out:
            while block := source.read(1 << 20):
                digest.update(block)
                out.write(block)
        os.chmod(dest, mode)
        if want is not None and (digest.hexdigest() != want.get("sha256") or dest.stat().st_size != want.get("size")):
            raise BundleError(f"{member.name} does not match the bundle's manifest (changed or damaged in transit); "
                              "copy the bundle again")
        if not stat.S_ISREG(dest.lstat().st_mode):
            raise BundleError(f"{member.name} did not unpack as a regular file")


def _same_bundle(target: Path, manifest: dict, archive: Path) -> Path:
    """A run of the bundle's name is already here: the same bundle unpacked before (go on with it), or
    another run, which is left alone."""
    try:
        here = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        here = None
    if isinstance(here, dict) and here.get("files") == manifest["files"] and here.get("made_at") == manifest["made_at"]:
        return target
    raise BundleError(f"a run named {target.name} already exists in {target.parent} and was not unpacked from "
                      f"{archive}; resume it by name, or pass --runs-dir DIR to unpack the bundle elsewhere")
