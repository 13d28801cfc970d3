"""The measure plan a run reviews and then runs: the baseline plus one MTP variant per distinct
speculative setting the evidence supports (tools/mtp/variants.py), the user's ``--mtp-steps``,
repeats, the bench client of this SGLang version, and the accuracy gate.

Variants: ``baseline``; ``mtp`` for the ``infer_mtp`` recommendation; ``mtp-<steps>-<topk>-<draft>``
for every other setting of a recipe that holds under the hooks' rules, for the hooks' automatic
choice when no recipe has it, and for each ``--mtp-steps`` entry: the settings the ``infer_mtp``
step judged (tools/mtp/settings.py), read from its outcome, never judged again here. The GPUs and
TP are preflight's plan (the one tuning takes). Every flag carries its evidence into the scripts.
"""
from __future__ import annotations

import os

from agent.steps.base import PlanStep, StepContext
from agent.steps.infer_mtp import mtp_settings_of
from tools.measure.accept_floors import read_floors
from tools.measure.accuracy import AccuracyPlan, offline_skip_reason
from tools.measure.client import bench_client_module
from tools.mtp.variants import SpecChoice
from tools.mtp.answer import Recommendation
from tools.mtp.settings import MtpSettings
from tools.scripts import EnvChoice, FlagChoice, MeasurePlan, ServeVariant
from tools.scripts.models import RESERVED_FLAGS
from tools.scripts.trust import held_back
from tools.scripts.user_args import parse_server_args, parse_server_env

PLAN_PARAMS = ("input_len", "output_len", "prompts_per_concurrency", "min_prompts", "warmup_requests",
               "ready_timeout_s", "port")
NO_CITATION = "recommended by infer_mtp without a citation: check before use"


def _source(recommended: Recommendation, flag: str) -> str:
    if flag in recommended.resolved_by:
        return recommended.resolved_by[flag]
    origin = recommended.flag_origins.get(flag)
    return origin.cite() if origin is not None else NO_CITATION


def _env_source(recommended: Recommendation, name: str) -> str:
    """Where the recipe sets it and why it is kept (SGLang reads it): the comment above its export."""
    origin = recommended.env_origins.get(name)
    where = origin.cite() if origin is not None else "the recommended recipe"
    why = recommended.env_evidence.get(name)
    return f"{where} ({why})" if why else where


def mtp_variant(base: ServeVariant, recommended: Recommendation) -> tuple[ServeVariant, list[str]]:
    notes: list[str] = []
    flags = []
    for flag, value in recommended.flags.items():
        if flag in RESERVED_FLAGS:
            notes.append(f"{flag} from the recommendation is left to the script's own setting")
            continue
        flags.append(FlagChoice(flag=flag, value=value, source=_source(recommended, flag)))
    env = [EnvChoice(name=k, value=v, source=_env_source(recommended, k)) for k, v in recommended.env.items()]
    variant = base.model_copy(update={"name": "mtp", "flags": flags, "env": env,
                                      "rationale": list(recommended.rationale)})
    return ServeVariant.model_validate(variant.model_dump()), notes  # re-validate names and values


def _choice_variant(base: ServeVariant, choice: SpecChoice) -> ServeVariant:
    flags = [FlagChoice(flag=k, value=v, source=choice.origins.get(k) or
                        ("user choice" if choice.source == "user" else NO_CITATION))
             for k, v in choice.flags.items() if k not in RESERVED_FLAGS]
    env = [EnvChoice(name=k, value=v, source=choice.env_sources.get(k) or
                     f"recipe env ({choice.origins.get(next(iter(choice.flags)), '?')})")
           for k, v in choice.env.items()]
    return ServeVariant.model_validate({**base.model_dump(), "name": choice.name, "flags": [f.model_dump() for f in flags],
                                        "env": [e.model_dump() for e in env],
                                        "rationale": [f"setting {choice.label}", *choice.why]})


def _more_variants(mtp: MtpSettings | None, base: ServeVariant, mtp_steps: list[str]
                   ) -> tuple[list[ServeVariant], list[str]]:
    """MTP variants beyond ``mtp``: other evidence settings, the hooks' choice, --mtp-steps (judged once,
    by the infer_mtp step)."""
    if mtp is None:
        if mtp_steps:
            return [], ["--mtp-steps ignored: no MTP evidence was gathered in this run (infer_mtp did not run)"]
        return [], []
    extra = [c for c in mtp.choices if c.source != "recommended"]
    return [_choice_variant(base, c) for c in extra], list(mtp.left_out)


def _accuracy(ctx: StepContext, variants: list[ServeVariant], tokenizer: str | None) -> AccuracyPlan | None:
    s = ctx.settings
    if len(variants) < 2 and not s.accuracy_data:
        return None  # nothing to gate; with a data file given, the baseline's own score is still reported
    skip = offline_skip_reason(s.accuracy_data, bool(tokenizer) or os.environ.get("HF_HUB_OFFLINE") == "1")
    return AccuracyPlan(questions=s.accuracy_questions, data_path=s.accuracy_data, tolerance=s.accuracy_tolerance,
                        skip_reason=skip)


def with_extra_flags(variants: list[ServeVariant], extra_flags: dict) -> list[ServeVariant]:
    """Flags the LLM planner proposed and the flag guard accepted ({flag: {value, origin}}):
    added to every variant but the baseline (or, with no other variant, to a new ``extra`` one)."""
    if not extra_flags:
        return variants
    choices = [FlagChoice(flag=f, value=str(v.get("value", "")), source=str(v.get("origin") or "user-accepted"))
               for f, v in extra_flags.items()]
    targets = variants[1:] or [variants[0].model_copy(update={"name": "extra", "flags": [], "rationale": [
        "baseline plus the extra flags the LLM planner proposed and the flag guard accepted"]})]
    tuned = []
    for v in targets:
        known = {c.flag for c in v.flags}
        tuned.append(ServeVariant.model_validate({**v.model_dump(), "flags": [
            *[c.model_dump() for c in v.flags], *[c.model_dump() for c in choices if c.flag not in known]]}))
    return [variants[0], *tuned]


def with_user_additions(variants: list[ServeVariant], flags: list[FlagChoice], env: list[EnvChoice]) -> list[ServeVariant]:
    """``--server-arg``/``--server-env`` on every variant, baseline included (a memory fraction or a
    library path the host needs); where a recipe set the same flag or variable, the user's value wins."""
    if not flags and not env:
        return variants
    mine, names = {c.flag for c in flags}, {e.name for e in env}
    return [ServeVariant.model_validate({**v.model_dump(), "flags": [
        *[c.model_dump() for c in v.flags if c.flag not in mine], *[c.model_dump() for c in flags]],
        "env": [*[e.model_dump() for e in v.env if e.name not in names], *[e.model_dump() for e in env]]})
        for v in variants]


def hold_back_trust(variants: list[ServeVariant], allowed: list[str]) -> tuple[list[ServeVariant], list[str]]:
    """Drop flags that widen trust (tools/scripts/trust.py) unless the user allowed them by name."""
    kept, held = [], []
    for variant in variants:
        flags = []
        for choice in variant.flags:
            why = held_back(choice.flag, choice.value, allowed)
            if why:
                held.append(f"{variant.name}: {why} (proposed by {choice.source})")
            else:
                flags.append(choice)
        kept.append(variant.model_copy(update={"flags": flags}))
    return kept, held


def build_plan(ctx: StepContext, step: PlanStep) -> tuple[MeasurePlan, list[str], list[str]]:
    """The plan, notes for the step's summary, and the evidence settings left out (and why)."""
    s = ctx.settings
    gpu_plan = ctx.planned_gpus()  # preflight's, as tuning takes it: the scripts name the same GPUs and TP
    notes = [*gpu_plan.notes, gpu_plan.described()]
    model = s.model_path or s.model
    base = ServeVariant(name="baseline", model_path=model, tp=gpu_plan.tp, gpus=gpu_plan.gpus,
                        rationale=["SGLang defaults for this model: the reference every ratio is against"])
    variants = [base]
    judged = mtp_settings_of(ctx.outcomes)
    recommended = judged.recommended if judged else None
    if recommended and recommended.needs:  # an input only the user has: no script runs with a guess for it
        notes.append("the recommended MTP setting is not measured: it needs "
                     + ", ".join(f"{flag} (the recipe reads ${var}, which has no default)"
                                 for flag, var in recommended.needs.items()))
    elif recommended:
        mtp, mtp_notes = mtp_variant(base, recommended)
        variants.append(mtp)
        notes += mtp_notes
    more, left_out = _more_variants(judged, base, s.mtp_steps)
    variants = [*variants, *more]
    variants = with_extra_flags(variants, step.params.get("extra_flags") or {})
    variants = with_user_additions(variants, parse_server_args(s.server_args, s.allow_flags),
                                   parse_server_env(s.server_env))
    variants, held = hold_back_trust(variants, s.allow_flags)
    notes += held
    variants = [v.model_copy(update={"rationale": [*v.rationale, gpu_plan.described()]}) for v in variants]
    extra = {k: step.params[k] for k in PLAN_PARAMS if k in step.params}
    tokenizer = s.tokenizer or s.model_path
    plan = MeasurePlan(variants=variants, concurrency=s.concurrency, tokenizer=tokenizer, repeats=s.repeats,
                       client_module=bench_client_module(ctx.sglang_root), accuracy=_accuracy(ctx, variants, tokenizer),
                       accept_floors=read_floors(ctx.sglang_root) if len(variants) > 1 else [], **extra)
    return plan, notes, left_out
