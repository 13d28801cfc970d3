"""The typed facts about a checkpoint: its architecture, its quantization, the drafters it carries.

Every fact says where it was read (``config.json:<key>``, ``model.safetensors.index.json:<tensor>``,
or the SGLang source line whose rule decided it). A drafter is carried (True), not carried (False), or
undecided (None, with the reason); ``presumed`` marks a True that rests on the config alone and that
the GPU host re-checks against the real checkpoint on ``resume``.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

DrafterKind = Literal["mtp_head", "dspark"]
DRAFTER_WORDS = {"mtp_head": "an MTP (NextN) head", "dspark": "a bundled DSpark drafter"}


class Quantization(BaseModel):
    method: str | None = Field(None, description="quant_method, e.g. fp8")
    fmt: str | None = Field(None, description="The FP8 format (fmt), e.g. e4m3")
    weight_block_size: list[int] | None = Field(None, description="[block_n, block_k] of block-FP8 weights")
    scale_fmt: str | None = Field(None, description="Scale format, e.g. ue8m0 (None: float32 scales)")
    expert_dtype: str | None = Field(None, description="Routed experts' dtype when it differs, e.g. fp4")
    cites: dict[str, str] = Field(default_factory=dict, description="field -> config.json:<key>")

    def line(self) -> str:
        block = "x".join(map(str, self.weight_block_size)) if self.weight_block_size else "no"
        parts = [f"{self.method or 'unquantized'}", f"{block} blocks" if self.weight_block_size else "",
                 f"{self.scale_fmt} scales" if self.scale_fmt else "", f"experts {self.expert_dtype}"
                 if self.expert_dtype else ""]
        return ", ".join(p for p in parts if p) + f" ({self.cites.get('method', 'config.json:quantization_config')})"


class Drafter(BaseModel):
    kind: DrafterKind
    carried: bool | None = Field(description="True / False / None: cannot be decided")
    presumed: bool = Field(False, description="True rests on config.json alone (no tensor index)")
    draft_architecture: str | None = Field(None, description="The draft class SGLang loads for it")
    how: str = Field(description="Why, in words, with the citations")
    cites: list[str] = Field(default_factory=list)
    block_size: int | None = Field(None, description="DSpark: the checkpoint's block size (gamma)")
    algorithms: list[str] = Field(default_factory=list, description=(
        "Algorithms that load this drafter by name (empty: every algorithm whose draft is the target's own)"))


class CheckpointFacts(BaseModel):
    """What the checkpoint in hand is, for the evidence, the tuning and the verification."""

    folder: str
    config: str = Field(description="The config.json read")
    architecture: str | None = Field(description="As SGLang serves it (V4.1's is renamed to DeepseekV4ForCausalLM)")
    written_architecture: str | None
    nested: bool = Field(False, description="The language model's fields came from text_config")
    quantization: Quantization | None = None
    drafters: list[Drafter] = Field(default_factory=list, description="Each drafter SGLang could load for it")
    index: str | None = Field(None, description="model.safetensors.index.json, when read")
    unknowns: list[str] = Field(default_factory=list, description="What could not be decided, and why")

    def drafter(self, kind: DrafterKind) -> Drafter | None:
        return next((d for d in self.drafters if d.kind == kind), None)

    def carried(self) -> list[Drafter]:
        return [d for d in self.drafters if d.carried]

    def drafter_for(self, algorithm: str) -> Drafter | None:
        """The drafter SGLang loads from this checkpoint for ``algorithm`` (its draft-architecture rule)."""
        named = next((d for d in self.drafters if algorithm in d.algorithms), None)
        return named or next((d for d in self.drafters if not d.algorithms), None)

    def refusal(self, algorithm: str) -> str | None:
        """Why ``algorithm``, drafting from this checkpoint, would load a drafter it does not carry (None: it may)."""
        drafter = self.drafter_for(algorithm)
        if drafter is None or drafter.carried:
            return None
        state = "does not carry" if drafter.carried is False else "is not shown to carry"
        return (f"{algorithm} drafts with {drafter.draft_architecture or DRAFTER_WORDS[drafter.kind]}, and the "
                f"checkpoint {state} {DRAFTER_WORDS[drafter.kind]}: {drafter.how}")

    def lines(self) -> list[str]:
        """The facts for a reader, one line each, cited."""
        arch = self.architecture or "unknown"
        if self.written_architecture and self.written_architecture != self.architecture:
            arch += f" (written {self.written_architecture}; SGLang serves it as {self.architecture})"
        out = [f"checkpoint {self.folder}: architecture {arch} (config.json:architectures)"
               + ("; language-model fields nested under text_config, flattened as SGLang does" if self.nested else "")]
        if self.quantization:
            out.append(f"quantization: {self.quantization.line()}")
        for d in self.drafters:
            state = {True: "carries", False: "does not carry", None: "cannot tell whether it carries"}[d.carried]
            out.append(f"{state} {DRAFTER_WORDS[d.kind]}{' (presumed)' if d.presumed else ''}: {d.how}")
        return out + [f"unknown: {u}" for u in self.unknowns]
