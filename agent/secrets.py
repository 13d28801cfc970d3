"""Secrets never reach a file we write: redaction by *value*.

Redacted: the values this process knows are secret (the LLM API key, an endpoint URL's password),
any URL's password, and text shaped like a credential (``sk-``, ``hf_``, ``ghp_``, ``xox?-`` tokens,
AWS key ids, ``Bearer``/``Basic``). A field name is a second net, only when its words say secret:
``max_tokens`` is a count, while a key pasted into a goal is a secret. Every writer of run data
(the trace, config.json, ``RunFolder.write_text``) goes through ``redact``.
"""
from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import urlsplit

MARK = "[redacted]"
_TOKENS = re.compile(r"(sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}"
                     r"|AKIA[0-9A-Z]{16}|(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,})")
# A key whose words say secret: "hf_token", "api-key", "Authorization"; not "max_tokens" (a count).
_SECRET_KEYS = re.compile(r"(?:^|[^a-z0-9])(?:api[_-]?key|apikey|(?:access|auth|bearer|hf|id|refresh)?[_-]?token|"
                          r"secret|password|passwd|authorization|credentials?)(?:$|[^a-z0-9])", re.I)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_AUTHORITY_END = re.compile(r"[/\s@'\"]")  # where a URL's userinfo ends (a password holds none of these)
_MIN_SECRET = 4  # shorter values would redact ordinary words; such a "secret" protects nothing anyway

_known: set[str] = set()
_lock = threading.Lock()


def remember(*values: str | None) -> None:
    """Register secret values of this process (empty or very short ones are ignored)."""
    with _lock:
        _known.update(v for v in values if v and len(v) >= _MIN_SECRET and v != MARK)


def url_password(url: str | None) -> str | None:
    """The password part of a URL's userinfo, if it has one."""
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def redact_text(text: str) -> str:
    with _lock:
        known = sorted(_known, key=len, reverse=True)  # longest first: a secret containing another
    for secret in known:
        text = text.replace(secret, MARK)
    text = _without_url_passwords(text)
    return _TOKENS.sub(MARK, text)


def _without_url_passwords(text: str) -> str:
    """``scheme://user:PASSWORD@host`` with the password replaced, in one pass over the text: each ``://``
    is looked at once, back over its scheme and forward to the end of its userinfo, and those stretches
    of two ``://`` never overlap (a scheme and a userinfo hold no ``/``). A regular expression for
    the same reads a long run of scheme-like letters again from every position in it."""
    out, done, at = [], 0, text.find("://")
    while at != -1:
        start = at + 3
        end_match = _AUTHORITY_END.search(text, start)
        end = end_match.start() if end_match else len(text)
        colon = text.find(":", start, end)
        if end_match and text[end] == "@" and colon != -1 and colon + 1 < end and _scheme_before(text, at):
            out += [text[done:colon + 1], MARK]
            done = end
        at = text.find("://", max(start, end - 1))  # "a://x:b://u:p@h": a scheme may end where this ends
    return "".join([*out, text[done:]])


def _scheme_before(text: str, at: int) -> bool:
    """Whether a URL scheme ends at ``at``: scheme characters right before it, one of them a letter."""
    i = at - 1
    while i >= 0 and text[i] in _SCHEME_CHARS:
        if text[i].isalpha():
            return True
        i -= 1
    return False


def redact(value: Any) -> Any:
    """``value`` (str, or dicts and lists of them, keys included) with every secret replaced by a marker."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {(redact(k) if isinstance(k, str) else k): (MARK if v and _SECRET_KEYS.search(str(k)) else redact(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value
