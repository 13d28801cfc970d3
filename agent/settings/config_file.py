"""Reading a settings file, and the allow list for the one found in the working folder.

A settings file can name programs the agent runs, where the LLM key is sent and which trust-widening
flags a script may carry. A ``./dsv4-agent.toml`` in a cloned repository is written by whoever controls
it, so it is read only once ``dsv4-agent config allow`` recorded its SHA-256 in the agent's state folder
(as direnv does); a changed file must be allowed again. One named by ``--config`` or
``$DSV4_CONFIG`` needs no allowing. Any settings file must be a regular file owned by the user (or
root) that nobody else may write, and the bytes checked are the bytes parsed (one read).
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tools.base import ToolError
from tools.state_dir import state_dir

MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few lines; more is not one
WORKING_FOLDER = "working folder"
CONFIG_FILE = "dsv4-agent.toml"
CONFIG_ENV = "DSV4_CONFIG"  # names the config file, like --config; not a setting itself


class ConfigFileError(Exception):
    """A settings file that may not be read; the message names the file and the fix."""


@dataclass(frozen=True)
class ConfigFile:
    path: Path        # absolute, symlinks resolved
    how: str          # "--config", "$DSV4_CONFIG" or WORKING_FOLDER
    sha256: str
    data: bytes

    def describe(self) -> str:
        return f"{self.path} ({'working folder, allowed' if self.how == WORKING_FOLDER else 'named by ' + self.how})"

    def record(self) -> dict:
        """What config.json and the trace say about it."""
        return {"path": str(self.path), "how": self.how, "sha256": self.sha256}


def config_path(explicit: str | None, cwd: Path, environ: Mapping[str, str]) -> tuple[Path, str]:
    """The config file to read and who chose it: ``--config``, ``$DSV4_CONFIG`` or the working folder
    (a named file must exist; one found in the working folder must have been allowed)."""
    if explicit:
        return cwd / Path(explicit).expanduser(), "--config"
    if environ.get(CONFIG_ENV):
        return cwd / Path(environ[CONFIG_ENV]).expanduser(), f"${CONFIG_ENV}"
    return cwd / CONFIG_FILE, WORKING_FOLDER


def read_config(path: Path, how: str) -> ConfigFile:
    """The file's bytes, after checking it is a regular file of the user's that only they may write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO named *.toml must not block us
    except OSError as err:
        raise ConfigFileError(f"config file {path} cannot be read ({err.strerror}); fix its permissions or "
                              "pass another file to --config") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        _check_owner_and_mode(path, info)
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigFileError(f"config file {path} is {info.st_size} bytes, more than a settings file's "
                                  f"{MAX_CONFIG_BYTES}; pass the right file to --config")
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigFileError(f"config file {path} grew past {MAX_CONFIG_BYTES} bytes while read; check it")
    return ConfigFile(path=Path(os.path.realpath(path)), how=how, sha256=hashlib.sha256(data).hexdigest(), data=data)


def _check_owner_and_mode(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ConfigFileError(f"config file {path} is not a regular file; pass a TOML file to --config")
    if info.st_uid not in (os.getuid(), 0):
        raise ConfigFileError(f"config file {path} belongs to another user (uid {info.st_uid}), who decides what "
                              f"it runs; it was not read. Copy what you need into a file of your own and pass it "
                              f"to --config")
    if info.st_mode & 0o022:
        raise ConfigFileError(f"config file {path} may be written by others (mode {stat.S_IMODE(info.st_mode):o}), "
                              f"who could change what it runs; it was not read. `chmod go-w {shlex.quote(str(path))}`")


def _record_path(real: Path) -> Path:
    try:
        folder = state_dir("allowed")
    except ToolError as err:
        raise ConfigFileError(str(err)) from None
    return folder / (hashlib.sha256(str(real).encode()).hexdigest()[:40] + ".json")


def _allow_command(path: Path) -> str:
    return f"dsv4-agent config allow {shlex.quote(str(path))}"


def check_allowed(found: ConfigFile) -> None:
    """Refuse a working-folder file the user has not allowed, or that changed since."""
    try:
        record = json.loads(_record_path(found.path).read_text())
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("path") != str(found.path):
        raise ConfigFileError(f"{found.path} is not allowed: a dsv4-agent.toml found in the working folder may "
                              f"name programs to run and where the API key goes; read it, then run "
                              f"`{_allow_command(found.path)}` (or name a file with --config)")
    if record.get("sha256") != found.sha256:
        raise ConfigFileError(f"{found.path} changed since it was allowed; read it again, then run "
                              f"`{_allow_command(found.path)}`")


def parsed(found: ConfigFile) -> dict:
    """The file's settings, keys as field names (``runs-dir`` -> ``runs_dir``)."""
    try:
        data = tomllib.loads(found.data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigFileError(f"{found.path}: not UTF-8 text; fix or remove the file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigFileError(f"{found.path}: not valid TOML ({err}); fix or remove the file") from None
    return {k.replace("-", "_"): v for k, v in data.items()}


def allow(path: Path, known: set[str]) -> tuple[ConfigFile, list[str]]:
    """Record the file's checksum as allowed; it must pass the owner and mode checks and name only
    ``known`` settings (values are checked when a campaign merges it under the environment and
    options). Returns the file and the settings it sets."""
    found = read_config(path, WORKING_FOLDER)
    keys = sorted(parsed(found))
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ConfigFileError(f"setting {unknown[0]!r} from {found.path}: unknown setting; fix the file first")
    record = _record_path(found.path)
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps({"path": str(found.path), "sha256": found.sha256, "allowed_at": time.time()}))
    os.replace(tmp, record)
    return found, keys


def deny(path: Path) -> bool:
    """Forget that the file was allowed; False when it was not."""
    record = _record_path(Path(os.path.realpath(path)))
    try:
        record.unlink()
    except FileNotFoundError:
        return False
    return True
