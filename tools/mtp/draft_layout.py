"""After SGLang resolved the flags: will the draft it loads for them find its weights in the checkpoint?

SGLang picks the draft class by the resolved algorithm and the checkpoint (its draft-architecture rule,
read by tools/checkpoint); the checkpoint's tensor index says whether that class's modules are there.
"Verified" needs both: arguments resolved and the draft's tensors listed. A draft that will not load
turns the verdict into a rejection, so no script is written for it.
"""
from __future__ import annotations

from pathlib import Path

from tools.checkpoint.facts import DRAFTER_WORDS, CheckpointFacts
from tools.mtp.answer import Verification


def with_draft_layout(verification: Verification, checkpoint: CheckpointFacts | None) -> Verification:
    if checkpoint is None or verification.status not in ("verified", "adjusted") or verification.resolved is None:
        return verification
    resolved = verification.resolved
    algorithm = resolved.speculative_algorithm
    draft = resolved.speculative_draft_model_path
    own = draft is None or Path(draft).expanduser().resolve() == Path(checkpoint.folder).expanduser().resolve()
    if not algorithm or not own:
        note = "the draft is a separate model, not this checkpoint's" if algorithm else "no speculative algorithm"
        return verification.model_copy(update={"draft_layout": "not_verified", "draft_note": note})
    drafter = checkpoint.drafter_for(algorithm)
    if drafter is None:
        return verification.model_copy(update={"draft_layout": "not_verified", "draft_note": (
            f"SGLang's tree names no draft class for {algorithm} on {checkpoint.architecture}")})
    refusal = checkpoint.refusal(algorithm)
    if refusal:
        return verification.model_copy(update={"status": "rejected", "draft_layout": "not_verified",
                                                "draft_note": refusal, "reason": f"the draft will not load: {refusal}"})
    if checkpoint.index is None:
        return verification.model_copy(update={"draft_layout": "not_verified", "draft_note": (
            f"no model.safetensors.index.json in {checkpoint.folder}, so the tensors of "
            f"{drafter.draft_architecture or DRAFTER_WORDS[drafter.kind]} could not be checked")})
    return verification.model_copy(update={"draft_layout": "verified", "draft_note": drafter.how})
