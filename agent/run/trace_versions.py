"""Which trace format versions this build reads, what to say about any other, and the lanes events come
from (no pydantic here: ``status`` reads traces without the schema, agent/run/trace_read.py)."""
from __future__ import annotations

from typing import Any, Literal

SCHEMA_VERSION = 1
SUPPORTED_VERSIONS: frozenset[int] = frozenset({SCHEMA_VERSION})
Lane = Literal["control", "gpu", "research", "llm"]  # who emitted an event: the envelope's ``lane``


def version_problem(version: Any) -> str | None:
    """None when a reader of this build understands ``version``; else why not and what to do."""
    if version in SUPPORTED_VERSIONS:
        return None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return (f"trace format v{version} was written by a newer dsv4-agent (this one reads "
                f"v{', v'.join(map(str, sorted(SUPPORTED_VERSIONS)))}); upgrade dsv4-agent to read it")
    return (f"trace format {version!r} is not one this dsv4-agent reads (it reads "
            f"v{', v'.join(map(str, sorted(SUPPORTED_VERSIONS)))}); the file predates versioned traces "
            "or is not a dsv4-agent trace — see docs/trace.md")
