"""``--executor`` parsed once into a typed value: ``local``, ``ssh://user@host[:port]`` (or
``ssh://alias`` from ~/.ssh/config), ``slurm`` or ``slurm:PARTITION``.

The settings hold an ``ExecutorSpec`` (written to config.json as the text the user gave); every
consumer reads its fields instead of parsing the text again.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

ACCEPTED = "'local', 'ssh://user@host[:port]' (or ssh://alias from ~/.ssh/config), 'slurm' or 'slurm:PARTITION'"
_PARTITION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ExecutorSpecError(ValueError):
    """A malformed --executor value; the message names it and the accepted forms."""


class ExecutorSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["local", "ssh", "slurm"]
    url: str = ""                 # ssh: the URL as given
    destination: str = ""         # ssh: user@host or host (an alias from ~/.ssh/config)
    port: int | None = None       # ssh: the port, when given
    partition: str | None = None  # slurm: the partition, when given

    @classmethod
    def parse(cls, text: str) -> "ExecutorSpec":
        text = str(text).strip()
        if text == "local":
            return cls(kind="local")
        if text.startswith("ssh://"):
            destination, port = _ssh_target(text)
            return cls(kind="ssh", url=text, destination=destination, port=port)
        if text == "slurm" or text.startswith("slurm:"):
            partition = text.partition(":")[2]
            if text.endswith(":"):
                raise ExecutorSpecError(f"executor {text!r} names an empty partition; use 'slurm' or 'slurm:PARTITION'")
            if partition and not _PARTITION.match(partition):
                raise ExecutorSpecError(f"Slurm partition {partition!r} in {text!r} may hold only letters, digits "
                                        "and . _ - (it goes into sbatch arguments)")
            return cls(kind="slurm", partition=partition or None)
        raise ExecutorSpecError(f"unknown executor {text!r}; use one of {ACCEPTED}")

    def __str__(self) -> str:
        if self.kind == "ssh":
            return self.url
        if self.kind == "slurm":
            return f"slurm:{self.partition}" if self.partition else "slurm"
        return "local"

    def reaches_same_ledger(self, other: "ExecutorSpec") -> bool:
        """Whether ``other`` can re-attach to jobs this one launched (a Slurm partition may change)."""
        return self.kind == other.kind and (self.kind == "slurm" or str(self) == str(other))


def _ssh_target(url: str) -> tuple[str, int | None]:
    """``ssh://user@host[:port]`` → (``user@host`` or ``host``, port or None)."""
    parts = urlsplit(url)
    if parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/") or parts.hostname.startswith("-"):
        raise ExecutorSpecError(f"bad SSH executor {url!r}; write it as ssh://user@host[:port] (or ssh://alias "
                                "from ~/.ssh/config)")
    try:
        port = parts.port
    except ValueError as err:
        raise ExecutorSpecError(f"bad port in {url!r} ({err}); write it as ssh://user@host:22") from err
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return (f"{parts.username}@{host}" if parts.username else host), port


def _coerce(value: Any) -> Any:
    return ExecutorSpec.parse(value) if isinstance(value, str) else value


ExecutorSetting = Annotated[ExecutorSpec, BeforeValidator(_coerce), PlainSerializer(str, return_type=str)]
