"""One SSH connection per host and option set, shared by the ledger calls (OpenSSH's multiplexing).

A campaign makes hundreds of ledger calls, each its own ``ssh``; alone, each pays a connect, a key
exchange and a login (benchmarks/ssh_calls.py). The first call becomes the master (OpenSSH's own
process, never signalled here); a refused session or stale socket makes ``ssh`` connect alone.
Port forwards stay out of it: one opened through a master would outlive forward.py's ``ssh -L``.
Sockets live in a folder of ours alone (0700), named by a hash of host, destination, port and
options; anything doubtful (that folder, an odd path, the user's ``Control*``) means no sharing.
"""
from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
from pathlib import Path

from tools.source.resolve import cache_dir

CONTROL_PERSIST_S = 60  # the shared connection outlives its last call by this long
# sun_path is 108 bytes on Linux; ssh first binds "<path>.<16 random characters>", then renames it
MAX_SOCKET_PATH = 107 - 17
NOT_SHARED = ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
_USER_SETS_CONTROL = re.compile(r"control(master|path|persist)", re.IGNORECASE)
_NOT_A_PLAIN_PATH = re.compile(r"[\s%\"'\\]")  # ssh would split or expand it (%h...) in an option


def socket_folder() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "dsv4-agent-ssh"
    return cache_dir() / "ssh"


def _private_folder(folder: Path) -> bool:
    """Create the folder 0700 if missing; True only for a real folder of ours that others cannot enter."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def shared_options(destination: str, port: int | None, ssh_options: list[str]) -> list[str]:
    """The ``-o`` options that put a ledger call on the shared connection ([] where it cannot be)."""
    if _USER_SETS_CONTROL.search(" ".join(ssh_options)):
        return []
    folder = socket_folder()
    identity = "\0".join([socket.gethostname(), destination, str(port), *ssh_options])
    path = folder / hashlib.blake2b(identity.encode(), digest_size=10).hexdigest()
    if (len(os.fsencode(path)) > MAX_SOCKET_PATH or _NOT_A_PLAIN_PATH.search(str(path))
            or not _private_folder(folder)):
        return []
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={path}", "-o", f"ControlPersist={CONTROL_PERSIST_S}"]
