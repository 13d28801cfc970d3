"""What a job is (``JobSpec``) and what we know about it (``JobState``)."""
from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

JobStatus = Literal["launching", "running", "succeeded", "failed", "timed_out", "stopped", "lost"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "timed_out", "stopped", "lost"})
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class JobSpec(BaseModel):
    """A command to run detached. ``key`` is unique in a run: launching it again re-attaches.

    What makes a relaunch "the same job": its ``identity`` when it has one (what the job measures,
    serves or tunes, e.g. variant, concurrency and settings), so that ports, absolute paths and
    the cwd of the agent are attributes that may change between the agent's attempts; without an
    identity, the argv, GPUs and cwd. See tools/jobs/attempts.py for attempts of one identity.
    """

    key: str = Field(description="Unique job name within the run, e.g. 'tune-gpu0'.")
    argv: list[str] = Field(min_length=1, description="Program and arguments; never a shell string.")
    kind: str = Field(default="other", description="tune | serve | bench | discovery | other")
    lane: Literal["gpu", "research", "control"] = "gpu"
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Added to the agent's environment.")
    gpus: list[int] | None = Field(
        default=None, description="Sets CUDA_VISIBLE_DEVICES; None inherits it, [] hides every GPU."
    )
    timeout_s: float | None = Field(default=None, gt=0)
    grace_s: float = Field(default=10.0, ge=0, description="SIGTERM-to-SIGKILL grace on stop/timeout.")
    identity: dict[str, Any] | None = Field(
        default=None, description="What the job does, as plain JSON data; equal identities are the same job.")

    @field_validator("key")
    @classmethod
    def _key_is_a_folder_name(cls, key: str) -> str:
        if not _KEY.match(key):
            raise ValueError(f"job key {key!r} must match {_KEY.pattern} (it names a folder)")
        return key

    def differs_from(self, recorded: dict) -> str | None:
        """Which part of this spec names a different job than the ledger's ``job.json``, or None."""
        if self.identity is not None and recorded.get("identity") is not None:
            return None if recorded["identity"] == _as_json(self.identity) else "identity"
        for field in ("argv", "gpus", "cwd"):
            if recorded.get(field) != getattr(self, field):
                return field
        return None

    def child_env(self) -> dict[str, str]:
        """The variables this job adds on top of the executor's environment."""
        env = dict(self.env)
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env


class JobState(BaseModel):
    key: str
    status: JobStatus
    kind: str = "other"
    lane: str = "gpu"
    gpus: list[int] | None = None
    pid: int | None = None          # the wrapper's pid (leader of its own process group)
    child_pgid: int | None = None   # the command's own process group
    launched_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    reason: str = ""
    log_path: str = ""
    attached: bool = False          # True when launch found the job already running/finished

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from a ledger file (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, sort_keys=True))
