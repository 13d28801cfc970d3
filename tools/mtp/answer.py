"""The MTP answer's shape (``docs/mtp-answer.schema.json``): candidates, constraints, the recommendation,
what was dropped from it and why, what is unknown, and what SGLang itself said about it."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.checkpoint.facts import CheckpointFacts
from tools.checkpoint.architecture import Architecture
from tools.source.origin import Origin


class SourceRef(BaseModel):
    kind: Literal["checkout", "package", "wheel"]
    root: str
    version: str | None
    commit: str | None


class Candidate(BaseModel):
    name: str = Field("", description="The recipe: path::Class, with its variant in brackets when it has one")
    flags: dict[str, str]
    other_flags: dict[str, str]
    env: dict[str, str]
    model: str
    hardware: str | None
    origin: Origin
    rejected: list[str] = Field(default_factory=list, description="Rules this recipe breaks, each cited; "
                                                                  "empty when it could be recommended")
    env_kept: dict[str, str] = Field(default_factory=dict, description=(
        "The part of env a script may set (SGLang reads it, or CUDA/NCCL/DeepEP); none for another model's recipe"))
    env_evidence: dict[str, str] = Field(default_factory=dict, description="Why each kept env var is kept")
    env_origins: dict[str, Origin] = Field(default_factory=dict, description="Where the recipe sets each kept one")
    written_flags: dict[str, str] = Field(default_factory=dict, description=(
        "The --speculative-* flags as the cited line writes them (flags holds them as SGLang resolves them)"))
    rewrites: list[str] = Field(default_factory=list, description=(
        "How SGLang rewrites the written flags into flags, each with the rule and its citation"))
    unread: dict[str, str] = Field(default_factory=dict, description=(
        "Flags and environment variables whose value static reading could not resolve: name -> the expression"))
    needs: dict[str, str] = Field(default_factory=dict, description=(
        "Flags the recipe takes from an environment variable with no default: flag -> variable (inputs, not values)"))
    condition: str | None = Field(None, description="The hardware condition this variant of the launch is for")
    complete: bool = Field(True, description=(
        "False when a value the recommendation would carry is not resolved or must be given by the user: such a "
        "candidate never becomes a script as it stands"))


class Constraint(BaseModel):
    rule: str
    origin: Origin


class Dropped(BaseModel):
    """A flag or environment variable of the recipe that the recommendation leaves out, and why."""

    kind: Literal["flag", "env"]
    name: str
    value: str
    origin: Origin | None = Field(description="Where the recipe sets it")
    reason: str


class Recommendation(BaseModel):
    flags: dict[str, str]
    env: dict[str, str]
    rationale: list[str]
    origin: Origin
    flag_origins: dict[str, Origin] = Field(description="Where each recommended flag's value comes from")
    env_origins: dict[str, Origin] = Field(default_factory=dict, description="Where each env value is set")
    env_evidence: dict[str, str] = Field(default_factory=dict, description=(
        "Why each env var is kept: where SGLang reads or defines it ('path:line'), or the CUDA/NCCL/DeepEP family"))
    dropped: list[Dropped] = Field(default_factory=list, description="Recipe flags and env left out, with reasons")
    resolved_by: dict[str, str] = Field(default_factory=dict, description=(
        "Flags whose value SGLang's own resolution set (--verify), with what static reading had"))
    needs: dict[str, str] = Field(default_factory=dict, description=(
        "Flags the user must give: flag -> the environment variable the recipe reads it from (no default)"))
    needs_origins: dict[str, Origin] = Field(default_factory=dict, description="Where the recipe reads each one")


class Resolved(BaseModel):
    """Speculative settings after SGLang's own argument resolution (every hook run)."""

    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None


class Verification(BaseModel):
    status: Literal["verified", "adjusted", "rejected", "not_verified"] = Field(description=(
        "verified: SGLang resolves the flags to what we recommend; adjusted: it resolves them differently "
        "(the resolved values are used); rejected: SGLang refuses them; not_verified: resolution could not run"))
    reason: str = Field("", description="Why not verified, or SGLang's own error text when rejected")
    sglang_version: str | None = None
    sglang_commit: str | None = Field(None, description="Commit of the SGLang that resolved (None for a release "
                                                        "without one)")
    python: str = Field("", description="The interpreter that ran the resolution")
    argv: list[str] = Field(default_factory=list, description="The exact server argv resolved")
    static: Resolved | None = Field(None, description="What static reading recommends")
    resolved: Resolved | None = Field(None, description="What SGLang resolved")
    mismatches: list[str] = Field(default_factory=list, description="Settings where the two differ")
    seconds: float | None = Field(None, description="Wall time of the resolution")
    filled: list[str] = Field(default_factory=list, description=(
        "Steps/topk/draft tokens left unset (SGLang's to choose, e.g. for DSPARK) and what it chose"))
    draft_layout: Literal["verified", "not_verified"] | None = Field(None, description=(
        "Whether the draft SGLang would load for the resolved algorithm is in the checkpoint's tensor names "
        "(None: no checkpoint read)"))
    draft_note: str = Field("", description="Why, with the draft class and the tensors it needs")

    def line(self) -> str:
        """One line for reports: 'flags verified by SGLang 0.5.23 at <commit>' or why not."""
        where = f"SGLang {self.sglang_version or '?'} at {self.sglang_commit or 'its release (no commit recorded)'}"
        filled = f" (SGLang chose {', '.join(self.filled)})" if self.filled else ""
        layout = {"verified": f"; draft layout verified: {self.draft_note}",
                  "not_verified": f"; draft layout not verified: {self.draft_note}", None: ""}[self.draft_layout]
        if self.status == "verified":
            return f"{'flags and draft layout' if self.draft_layout == 'verified' else 'flags'} verified by {where}" \
                   f"{filled}{layout}"
        if self.status == "adjusted":
            return (f"flags resolved differently by {where}: {'; '.join(self.mismatches)}; the resolved values are "
                    f"used{layout}")
        if self.status == "rejected":
            return f"flags rejected by {where}: {self.reason}"
        return f"not verified: {self.reason}"


class MtpAnswer(BaseModel):
    model: str
    architecture: str | None
    architecture_decision: Architecture | None = Field(None, description="How the architecture was decided: "
                                                       "config.json, else --arch, else the SGLang tree")
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint in hand (--model-path), read as data")
    source: SourceRef
    candidates: list[Candidate]
    constraints: list[Constraint]
    recommended: Recommendation | None
    unknowns: list[str]
    verification: Verification | None = Field(None, description="SGLang's own resolution of the recommended "
                                                                "flags (mtp --verify, campaigns)")
