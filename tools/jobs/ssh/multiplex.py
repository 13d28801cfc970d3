"""One SSH connection per host and option set, shared by the ledger calls (OpenSSH's multiplexing).

Why: every ledger operation is its own ``ssh`` call, and a campaign makes hundreds. Alone, each one
pays a TCP connect, a key exchange and a public-key login: measured on loopback, 0.21 core-s and
0.31 s per call; riding on a shared connection, 0.11 core-s and 0.1 s (what is left is the host's
login shell and Python). Over a WAN the saving is round trips. With ``ControlMaster=auto`` the first
call becomes the master and later calls use it; ``ControlPersist`` keeps it that long after the
last call, then it ends by itself. The master is OpenSSH's own background process, in a session of
its own: nothing here ever signals it.

When the host refuses one more session on the connection (sshd's ``MaxSessions``, 10 by default)
or the socket is stale, ``ssh`` connects on its own instead, so multiplexing only ever saves work.

Port forwards are kept out of it (``ControlPath=none``, which also overrides a ``ControlMaster`` in
the user's ``~/.ssh/config``): a forward opened through a master belongs to the master, and ending
our ``ssh -L`` process, the only one forward.py signals, would leave the port forwarded.

The sockets live in a folder that is ours alone (a real folder, owned by this user, mode 0700):
``$XDG_RUNTIME_DIR/dsv4-agent-ssh`` where that is set, else ``ssh/`` in the agent's cache. A socket
name hashes this machine's name, the destination, the port and the ssh options, so calls with other
keys or configs never share a connection, nor machines sharing a home folder over NFS. When the
folder fails those checks, or the path would be too long for a Unix socket or hold blanks, quotes or
``%`` (ssh would split or expand it), calls connect on their own, as before. Options the user passes
that set ``Control*`` themselves are left to decide.
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
