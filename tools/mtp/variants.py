"""Which speculative settings to measure: one per distinct setting the evidence supports, each cited.

The evidence answer (tools/mtp/) lists launch recipes (``candidates``) and recommends one. The
measure plan gets the recommended setting (variant ``mtp``), then every other distinct setting
of a candidate that holds under the hooks' rules for this architecture (variant
``mtp-<steps>-<topk>-<draft tokens>``), then the hooks' automatic choice when no candidate has it.
A candidate of another model carries over only when its draft is the target's own checkpoint (the
hooks' draft-path fallback, where its condition holds), as the recommendation does. Rules are
judged as the evidence engine judges them (tools/mtp/pick.py): each applies only where its
condition holds. A candidate's environment is the vetted part (tools/mtp/env.py), each cited. ``cap`` keeps the first
``cap`` of those (recommended first, then by closeness of the recipe's hardware to the target).

User settings (``--mtp-steps 1,2,3`` or ``S/K/D``) are added after the cap. Each is checked
against the applicable hook rules after SGLang's own rewrites (topk 1 forces draft tokens = steps +
1); a setting a rule forbids is an error citing the rule.
"""
from __future__ import annotations

import re

from pydantic import BaseModel, Field

from tools.base import ToolError
from pathlib import Path

from tools.constraints.extract import Rule
from tools.mtp.answer import Candidate, MtpAnswer
from tools.recipes.model import same_model
from tools.mtp.pick import ALGO, DRAFT, STEPS, TOKENS, TOPK, Judge, hardware_score
from tools.source.fields import read_fields_at
from tools.source.origin import Origin

_USER = re.compile(r"^\s*(\d+)(?:/(\d+)/(\d+))?\s*$")


class SpecChoice(BaseModel):
    """One speculative setting to measure, with where it comes from."""

    name: str = Field(description="Variant name: 'mtp' for the recommendation, else mtp-S-K-D")
    flags: dict[str, str] = Field(description="--speculative-* flags, as the server will run them")
    origins: dict[str, str] = Field(default_factory=dict, description="flag -> 'path:line' of its evidence")
    env: dict[str, str] = Field(default_factory=dict, description="Only what SGLang reads (tools/mtp/env.py)")
    env_sources: dict[str, str] = Field(default_factory=dict, description="env var -> 'path:line (why kept)'")
    why: list[str] = Field(default_factory=list)
    source: str = Field(description="recommended | evidence | hooks | user")

    @property
    def label(self) -> str:
        return setting_label(self.flags)


def setting_label(flags: dict[str, str]) -> str:
    """'3/1/4' for steps/topk/draft tokens; the algorithm and other flags when those are absent."""
    if flags.get(STEPS):
        return "/".join(flags.get(k, "?") for k in (STEPS, TOPK, TOKENS))
    rest = " ".join(f"{k.removeprefix('--speculative-')}={v}" for k, v in flags.items() if k != ALGO)
    return (flags.get(ALGO, "none") + (f" {rest}" if rest else "")).strip()


def _key(flags: dict[str, str]) -> tuple:
    return tuple(sorted(flags.items()))


def _name(flags: dict[str, str]) -> str:
    if flags.get(STEPS):
        return "mtp-" + "-".join(flags.get(k, "x") for k in (STEPS, TOPK, TOKENS))
    return "mtp-" + re.sub(r"[^a-z0-9]+", "-", setting_label(flags).lower()).strip("-")[:35]


def _judge(answer: MtpAnswer, rules: list[Rule]) -> Judge:
    """The evidence engine's judge: each rule applies only where its condition holds."""
    return Judge(rules, answer.architecture, read_fields_at(Path(answer.source.root)), answer.checkpoint)


def _carries_over(cand: Candidate, model: str, judge: Judge) -> bool:
    if same_model(cand.model, model) or judge.own_drafter(dict(cand.flags)) is not None:
        return True
    fallback = [r for r in judge.applying(dict(cand.flags), ("draft_path_fallback",), []) if r.architectures]
    return bool(fallback) and cand.flags.get(DRAFT) in (None, cand.model)


def _env_sources(cand: Candidate) -> dict[str, str]:
    return {k: f"{cand.env_origins[k].cite() if k in cand.env_origins else cand.origin.cite()}"
               f" ({cand.env_evidence.get(k, 'recipe env')})" for k in cand.env_kept}


def _from_candidate(cand: Candidate, judge: Judge) -> SpecChoice | str:
    flags = {k: v for k, v in cand.flags.items() if k.startswith("--speculative-")}
    origins = {k: cand.origin for k in flags}
    why = [f"recipe for {cand.model} on {cand.hardware or 'unspecified hardware'} ({cand.origin.cite()})"]
    judge.resolve_alias(flags, origins, why, [])
    judge.repair(flags, origins, why, [])
    refused = judge.drafter_problem(flags)
    if refused:
        return f"{setting_label(flags)} from {cand.origin.cite()} is not measured: {refused}"
    problems = judge.check(flags).problems
    if problems:
        text, rule = problems[0]
        return f"{setting_label(flags)} from {cand.origin.cite()} breaks a hook rule: {text} ({rule.origin.cite()})"
    return SpecChoice(name=_name(flags), flags=flags, origins={k: o.cite() for k, o in origins.items()},
                      env=dict(cand.env_kept), env_sources=_env_sources(cand), why=why, source="evidence")


def _auto(answer: MtpAnswer, judge: Judge) -> SpecChoice | None:
    algorithm = (answer.recommended.flags.get(ALGO) if answer.recommended else None)
    if not algorithm:
        return None
    flags: dict[str, str] = {ALGO: algorithm}
    origins: dict[str, Origin] = {}  # the algorithm is the recommendation's, cited where it is
    if answer.recommended is not None and ALGO in answer.recommended.flag_origins:
        origins[ALGO] = answer.recommended.flag_origins[ALGO]
    chosen: list[str] = []
    judge.fill_automatic(flags, origins, chosen, [])
    if STEPS not in flags:
        return None
    auto = origins[STEPS]
    why = [f"SGLang's automatic choice for {answer.architecture} when no steps are given ({auto.cite()})"]
    return SpecChoice(name=_name(flags), flags=flags, origins={k: o.cite() for k, o in origins.items()},
                      why=why, source="hooks")


def _other_drafters(answer: MtpAnswer, judge: Judge, chosen: list[SpecChoice]) -> list[SpecChoice]:
    """A checkpoint carrying two drafters (an MTP head and a bundled DSpark drafter) measures both."""
    from tools.mtp.choose import from_hooks
    from tools.mtp.drafter_choice import from_checkpoint

    facts = answer.checkpoint
    if facts is None or answer.architecture is None:
        return []
    served = {id(facts.drafter_for(c.flags[ALGO])) for c in chosen if c.flags.get(ALGO)}
    from tools.measure.client import package_dir

    root = Path(answer.source.root)
    package = package_dir(root)
    out = []
    for drafter in (d for d in facts.carried() if id(d) not in served):
        rec = from_checkpoint(judge, package)[0] if drafter.algorithms else \
            from_hooks(answer.architecture, judge, root, package)[0]
        if rec is not None:
            out.append(SpecChoice(name=_name(rec.flags), flags=dict(rec.flags), why=list(rec.rationale),
                                  origins={k: o.cite() for k, o in rec.flag_origins.items()}, source="hooks"))
    return out


def evidence_choices(answer: MtpAnswer, rules: list[Rule], target_gpu: str | None = None,
                     target_gpus: int | None = None, cap: int | None = None) -> tuple[list[SpecChoice], list[str]]:
    """The MTP settings the evidence supports, recommended first; notes say what was left out."""
    judge = _judge(answer, rules)
    notes: list[str] = []
    chosen: list[SpecChoice] = []
    rec = answer.recommended
    if rec is not None:
        flags = {k: v for k, v in rec.flags.items() if k.startswith("--speculative-")}
        chosen.append(SpecChoice(name="mtp", flags=flags, env=dict(rec.env), why=list(rec.rationale),
                                 origins={k: o.cite() for k, o in rec.flag_origins.items()}, source="recommended"))
    ranked = sorted(answer.candidates, key=lambda c: -hardware_score(c.hardware, None, target_gpu, target_gpus))
    for cand in ranked:
        if not cand.complete:
            missing = [f"${v} for {k}" for k, v in cand.needs.items()] + [
                f"{k} = `{v}`" for k, v in cand.unread.items()]
            notes.append(f"{setting_label(cand.flags)} ({cand.origin.cite()}) is not complete as it stands "
                         f"({'; '.join(missing) or 'see its candidate entry'}): not measured")
            continue
        if cand.rejected and cand.model.lower().rstrip("/").split("/")[-1] == answer.model.lower().rstrip("/").split("/")[-1]:
            notes.append(f"{setting_label(cand.flags)} ({cand.origin.cite()}) breaks a hook rule: {cand.rejected[0]}")
            continue
        if not _carries_over(cand, answer.model, judge):
            notes.append(f"{setting_label(cand.flags)} ({cand.origin.cite()}) is a recipe for {cand.model} whose draft "
                         "is not the target checkpoint's own: not measured")
            continue
        choice = _from_candidate(cand, judge)
        if isinstance(choice, str):
            notes.append(choice)
        elif _key(choice.flags) not in {_key(c.flags) for c in chosen}:
            chosen.append(choice)
        else:
            twin = next(c for c in chosen if _key(c.flags) == _key(choice.flags))
            twin.why.append(f"also in {cand.origin.cite()} ({cand.hardware or 'unspecified hardware'})")
    auto = _auto(answer, judge)
    if auto is not None:
        twin = next((c for c in chosen if _key(c.flags) == _key(auto.flags)), None)
        if twin is None:
            chosen.append(auto)
        else:
            twin.why.append(auto.why[0].replace("SGLang's", "also SGLang's"))
    chosen += _other_drafters(answer, judge, chosen)
    if cap is not None and len(chosen) > cap:
        notes.append(f"--mtp-variants {cap}: left out {', '.join(c.label for c in chosen[cap:])}")
        chosen = chosen[:cap]
    return chosen, notes


def parse_user_setting(text: str) -> tuple[int, int | None, int | None]:
    match = _USER.match(text)
    if not match or int(match[1]) < 1:
        raise ToolError(f"--mtp-steps entry {text!r} must be a step count >= 1 (e.g. 2) or steps/topk/draft "
                        "tokens (e.g. 3/1/4)")
    steps, topk, draft = match.groups()
    return int(steps), (int(topk) if topk else None), (int(draft) if draft else None)


def user_choices(entries: list[str], answer: MtpAnswer, rules: list[Rule],
                 known: list[SpecChoice]) -> list[SpecChoice]:
    """Settings the user asked for, checked against the hooks' rules; a forbidden one raises."""
    if not entries:
        return []  # nothing asked for: nothing to check (a tree without MTP evidence is no error then)
    judge = _judge(answer, rules)
    stepped = [c.flags[ALGO] for c in known if c.flags.get(ALGO) and not judge.own_drafter(c.flags)]
    algorithm = next(iter(stepped), None)
    if algorithm is None and known:
        refused = judge.drafter_problem({ALGO: "EAGLE"}) or "its drafter drafts a fixed block, not steps"
        raise ToolError(f"--mtp-steps {','.join(entries)} sets the draft steps of an MTP head, but {refused}; drop "
                        f"--mtp-steps: the campaign measures the checkpoint's own drafter ({known[0].label})")
    if algorithm is None:
        raise ToolError(f"--mtp-steps needs a speculative algorithm, and the evidence has none for {answer.model}: "
                        "see `dsv4-agent mtp` for what the tree says")
    out: list[SpecChoice] = []
    for entry in entries:
        steps, topk, draft = parse_user_setting(entry)
        flags = {ALGO: algorithm, STEPS: str(steps), TOPK: str(topk or 1), TOKENS: str(draft or steps + 1)}
        origins: dict[str, Origin] = {}
        why = [f"user choice (--mtp-steps {entry.strip()})"]
        judge.repair(flags, origins, why, [])  # SGLang's own rewrites (topk 1: draft tokens = steps + 1)
        refused = judge.drafter_problem(flags)
        if refused:
            raise ToolError(f"--mtp-steps {entry.strip()}: {refused}; drop --mtp-steps or point --model-path at a "
                            "checkpoint that carries that drafter")
        problems = judge.check(flags).problems
        if problems:
            text, rule = problems[0]
            raise ToolError(f"--mtp-steps {entry.strip()}: {text}: {rule.rule} ({rule.origin.cite()}); "
                            "pick a setting the hooks allow")
        if _key(flags) in {_key(c.flags) for c in [*known, *out]}:
            continue  # already measured from the evidence
        out.append(SpecChoice(name=_name(flags), flags=flags, why=why, source="user",
                              origins={k: o.cite() for k, o in origins.items()}))
    return out
