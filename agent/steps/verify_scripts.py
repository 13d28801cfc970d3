"""Before the serve scripts are written: SGLang itself resolves each speculative variant's exact argv.

For every variant with ``--speculative-*`` flags, ``tools/mtp/verify.py`` runs the reviewable
``verify/verify_flags.py`` in the SGLang interpreter on the argv the script will run (model path,
tp size, host, port, measurement flags, every variant flag); one process resolves them all. The result goes to
``verify/<variant>.json``. Verified: unchanged. Adjusted: the variant takes SGLang's resolved
values, each flag's source saying so. Rejected: the variant is left out of the scripts (it would
not start). Not verified: unchanged, with the reason. One line per variant joins the step summary,
which the report shows ("flags verified by SGLang <version> at <commit>").
"""
from __future__ import annotations

from pathlib import Path

from agent.steps.base import StepContext
from agent.steps.infer_mtp import mtp_settings_of
from tools.mtp.answer import Verification
from tools.mtp.verify import VerifyArgs, resolved_flags, verify_many
from tools.scripts import FlagChoice, MeasurePlan, ServeVariant

VERIFY_DIR = "verify"


def _checkpoint(ctx: StepContext, variant: ServeVariant) -> str | None:
    """The folder with config.json: the variant's model path when it is local, else --model-path."""
    if (Path(variant.model_path).expanduser() / "config.json").is_file():
        return variant.model_path
    return ctx.settings.model_path


def _split(variant: ServeVariant, port: int) -> tuple[dict[str, str], list[str]]:
    """(speculative flags, the rest of the serve argv after the model path), as the script runs them."""
    words = variant.launch_args(port)[2:]  # after "-m sglang.launch_server"
    at = words.index("--model-path")
    rest = words[:at] + words[at + 2:]
    speculative = {f.flag: f.value for f in variant.flags if f.flag.startswith("--speculative-")}
    for choice in variant.flags:
        if choice.flag in speculative:
            at = rest.index(choice.flag)
            del rest[at:at + (1 if choice.value == "" else 2)]
    return speculative, rest


def _adjusted(variant: ServeVariant, verification: Verification, flags: dict[str, str]) -> ServeVariant:
    updated = resolved_flags(flags, verification)
    who = f"resolved by SGLang {verification.sglang_version or '?'} (verify/{variant.name}.json)"
    choices = [FlagChoice(flag=c.flag, value=updated.get(c.flag, c.value),
                          source=c.source if updated.get(c.flag, c.value) == c.value else f"{who}; was {c.value}")
               for c in variant.flags]
    known = {c.flag for c in variant.flags}
    choices += [FlagChoice(flag=f, value=v, source=who) for f, v in updated.items() if f not in known]
    return ServeVariant.model_validate({**variant.model_dump(), "flags": [c.model_dump() for c in choices],
                                        "rationale": [*variant.rationale, verification.line()]})


def verify_plan(ctx: StepContext, plan: MeasurePlan) -> tuple[MeasurePlan, list[str]]:
    """The plan with SGLang's verdict applied to each speculative variant, and one note per variant.
    All the variants are resolved by one SGLang process (its import is most of the time)."""
    speculative = {}
    judged = mtp_settings_of(ctx.outcomes)
    checkpoint = judged.checkpoint if judged is not None else None  # the draft layout is checked against it
    for variant in plan.variants:
        flags, rest = _split(variant, plan.port)
        if flags:
            speculative[variant.name] = VerifyArgs(
                sglang_python=ctx.settings.sglang_python, flags=flags, model_path=_checkpoint(ctx, variant),
                extra_argv=rest, script_dir=str(ctx.run.file(VERIFY_DIR)), checkpoint=checkpoint)
    verdicts = dict(zip(speculative, verify_many(list(speculative.values())), strict=True))
    kept, notes = [], []
    for variant in plan.variants:
        if variant.name not in speculative:
            kept.append(variant)
            continue
        verification = verdicts[variant.name]
        script = ctx.run.file(f"{VERIFY_DIR}/verify_flags.py")
        if script.is_file():
            ctx.emit("artifact_written", path=f"{VERIFY_DIR}/verify_flags.py", bytes=script.stat().st_size)
        ctx.write_artifact(f"{VERIFY_DIR}/{variant.name}.json", verification.model_dump_json(indent=2))
        ctx.progress(f"{variant.name}: {verification.line()}", verification=verification.status,  # a fact of the step
                     result=f"{VERIFY_DIR}/{variant.name}.json", seconds=verification.seconds)
        if verification.status == "rejected":
            notes.append(f"{variant.name}: {verification.line()}; left out of the scripts")
            continue
        notes.append(f"{variant.name}: {verification.line()}")
        flags = speculative[variant.name].flags
        kept.append(_adjusted(variant, verification, flags) if verification.status == "adjusted" else variant)
    return plan.model_copy(update={"variants": kept}), notes
