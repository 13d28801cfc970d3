"""Server flags that widen what the server runs or who can reach it.

Such a flag is never added because a repository recipe or a model proposed it: only the user's
``--allow-flag NAME`` lets it through, and each one held back is listed in the flag review. The
list, from SGLang 0.5.23's argument fields: ``--trust-remote-code`` (runs the checkpoint's code),
``--host`` other than loopback (reachable from other machines), ``--enable-...-api``,
``--enable-custom-logit-processor`` (requests carry code), flags naming modules or plugins to
import, and any flag named like remote code, a plugin, a hook or a loader (newer versions).
"""
from __future__ import annotations

import ipaddress
import re

NAMED = {
    "--trust-remote-code": "runs Python code shipped with the model checkpoint",
    "--host": "makes the server reachable from other machines",
    "--enable-custom-logit-processor": "lets requests carry code the server runs",
    "--custom-weight-loader": "imports a Python module named by the value",
    "--forward-hooks": "attaches hook code named by import path",
    "--hicache-storage-backend-extra-config": "may name a Python module to load as a storage backend",
}
_PATTERNS = ((re.compile(r"^--enable-[a-z0-9-]+-api$"), "exposes an extra HTTP API"),
             (re.compile(r"(remote-code|plugins?|hooks?|-loader)(-path)?$"), "loads code named by its value"))
_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def _loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def trust_reason(flag: str, value: str = "") -> str:
    """Why ``flag value`` widens trust ('' when it does not)."""
    if flag == "--host":
        return "" if _loopback(value) else NAMED[flag]
    if flag in NAMED:
        return NAMED[flag]
    return next((why for pattern, why in _PATTERNS if pattern.search(flag)), "")


def check_allowed_flags(names: list[str]) -> list[str]:
    """The ``--allow-flag`` values as flags (``--name``); a flag that widens nothing is a mistake."""
    flags = [n if n.startswith("--") else f"--{n}" for n in (str(n).strip() for n in names)]
    for flag in flags:
        probe = "0.0.0.0" if flag == "--host" else ""
        if not trust_reason(flag, probe):
            raise ValueError(f"names {flag}, which needs no permission; it takes only flags that widen trust: "
                             f"{', '.join(NAMED)}, --enable-*-api, plugin/hook/loader flags")
    return flags


def held_back(flag: str, value: str, allowed: list[str] | tuple[str, ...]) -> str:
    """Why ``flag`` may not be added without the user's permission ('' when it may)."""
    reason = trust_reason(flag, value)
    if not reason or flag in allowed:
        return ""
    return f"{flag} {reason}; held back: pass --allow-flag {flag} to use it"
