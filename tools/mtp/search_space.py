"""The fenced search space: every speculative setting a budgeted search may measure, each with why it is allowed.

The fence comes from the evidence and the checkpoint, never from a guess:

- every setting the evidence supports (tools/mtp/variants.py: the recommendation, each recipe's setting
  that holds under the hooks' rules, the hooks' automatic choice, the checkpoint's own drafters), with its
  citations;
- for an algorithm that drafts in steps (EAGLE with the checkpoint's MTP head), every step count from 1 to the
  largest any of those settings uses, at topk 1 with SGLang's own topk-1 rewrite applied (draft tokens = steps
  + 1), each judged by the hooks' rules (tools/mtp/pick.py ``Judge``); a step count a rule forbids is fenced
  out, citing the rule;
- a bundled drafter that drafts a block (DSPARK) gets no step counts; where the tree lets a flag set its
  block (``speculative_dspark_block_size``), every block size from 1 to the one the checkpoint says it
  was trained on, else only its own block;
- adaptive drafting (``--speculative-adaptive``) only where the tree defines that server field, for EAGLE at
  topk 1 (the only shape SGLang offers it for).

``fences`` says, in words and with citations, what bounds the space; a ``--mtp-steps`` entry outside it is
refused with the fence that excludes it (``outside``).
"""
from __future__ import annotations

from pydantic import BaseModel, Field

from tools.mtp.variants import SpecChoice, _judge, _key, _name, setting_label
from tools.mtp.answer import MtpAnswer
from tools.constraints.extract import Rule
from tools.mtp.pick import ALGO, STEPS, TOKENS, TOPK
from tools.source.origin import Origin

ADAPTIVE_FIELD = "speculative_adaptive"
ADAPTIVE_FLAG = "--speculative-adaptive"
BLOCK_FIELD = "speculative_dspark_block_size"
BLOCK_FLAG = "--speculative-dspark-block-size"


class SearchSpace(BaseModel):
    """The settings a budgeted search measures (``points``, the evidence's first) and what fences them."""

    points: list[SpecChoice] = Field(default_factory=list, description="Every setting in the space, each citing why")
    fences: list[str] = Field(default_factory=list, description="What bounds the space, with citations")
    max_steps: int | None = Field(None, description="The largest step count in the space (None: no stepped drafter)")
    algorithm: str | None = Field(None, description="The stepped algorithm the step counts are for")

    def lines(self) -> list[str]:
        """plan.md's section: one line per point (its label and why), then the fences."""
        out = [f"- `{p.name}` ({p.label}): {'; '.join(p.why)}" for p in self.points]
        return out + [f"- fence: {f}" for f in self.fences]


def _stepped(choices: list[SpecChoice], judge) -> list[SpecChoice]:
    return [c for c in choices if c.flags.get(STEPS, "").isdigit() and not judge.own_drafter(c.flags)]


def _step_point(steps: int, algorithm: str, widest: SpecChoice, judge) -> SpecChoice | str:
    flags = {ALGO: algorithm, STEPS: str(steps), TOPK: "1", TOKENS: str(steps + 1)}
    origins: dict[str, Origin] = {}
    why = [f"step count {steps}: within 1..{widest.flags[STEPS]}, the most steps a supported setting uses "
           f"({widest.label}: {widest.origins.get(STEPS, 'the evidence')})"]
    judge.repair(flags, origins, why, [])
    refused = judge.drafter_problem(flags)
    if refused:
        return f"{steps} steps: {refused}"
    problems = judge.check(flags).problems
    if problems:
        text, rule = problems[0]
        return f"{steps} steps are fenced out: {text}: {rule.rule} ({rule.origin.cite()})"
    why.append("topk 1, draft tokens = steps + 1" + (f" (SGLang's rewrite, {origins[TOKENS].cite()})"
                                                       if TOKENS in origins else " (SGLang's topk-1 rule)"))
    return SpecChoice(name=_name(flags), flags=flags, origins={k: o.cite() for k, o in origins.items()}, why=why,
                      source="hooks")


def _adaptive(answer: MtpAnswer, judge, base: SpecChoice | None) -> SpecChoice | str:
    field = judge.fields.get(ADAPTIVE_FIELD)
    if field is None:
        return (f"adaptive drafting is not in the space: this tree ({answer.source.root}) defines no "
                f"{ADAPTIVE_FIELD} server field")
    if base is None or base.flags.get(TOPK, "1") != "1" or base.flags.get(ALGO) != "EAGLE":
        return "adaptive drafting is not in the space: SGLang offers it for EAGLE at topk 1, and no such setting is"
    flags = {**base.flags, ADAPTIVE_FLAG: ""}  # a switch (a bool field)
    return SpecChoice(name=_name(base.flags) + "-adaptive", flags=flags,
                      origins={**base.origins, ADAPTIVE_FLAG: field.origin.cite()}, source="hooks",
                      why=[f"{base.label} with adaptive drafting: the tree defines {ADAPTIVE_FIELD} "
                           f"({field.origin.cite()})"])


def _blocks(choice: SpecChoice, judge) -> list[SpecChoice | str]:
    """A bundled block drafter's block sizes: 1 up to the block it was trained with (the checkpoint's), where the
    tree lets a flag set the block; else only its own block. Each judged by the hooks' rules."""
    drafter = judge.own_drafter(choice.flags)
    trained = drafter.block_size if drafter is not None else None
    field = judge.fields.get(BLOCK_FIELD)
    if trained is None or field is None:
        why = "the checkpoint states no block size" if trained is None else f"this tree defines no {BLOCK_FIELD} field"
        return [f"{choice.label}: the checkpoint's own drafter drafts the block it carries ({why}); no other block "
                "size is searched"]
    out: list[SpecChoice | str] = [f"block sizes 1..{trained}: the drafter was trained on blocks of {trained} "
                                   "(the checkpoint's dspark_block_size); a larger block drafts positions it never "
                                   "learned"]
    for size in range(1, trained):
        flags = {**choice.flags, BLOCK_FLAG: str(size)}
        if TOKENS in flags:  # SGLang refuses draft tokens other than block + 1 (its DSpark hook)
            flags[TOKENS] = str(size + 1)
        problems = judge.check(flags).problems
        if problems:
            text, rule = problems[0]
            out.append(f"block {size} is fenced out: {text}: {rule.rule} ({rule.origin.cite()})")
            continue
        out.append(SpecChoice(name=f"mtp-{choice.flags[ALGO].lower()}-b{size}", flags=flags, source="hooks",
                              origins={**choice.origins, BLOCK_FLAG: field.origin.cite()},
                              why=[f"block {size} of the {trained} the drafter was trained on: SGLang sets draft tokens "
                                   f"= block + 1 ({BLOCK_FIELD}, {field.origin.cite()})"]))
    return out


def fence(answer: MtpAnswer, rules: list[Rule], choices: list[SpecChoice]) -> SearchSpace:
    """The space around the evidence's settings (``choices``), each point citing why it is allowed."""
    judge = _judge(answer, rules)
    points = list(choices)
    fences: list[str] = []
    stepped = _stepped(choices, judge)
    for block in (c for c in choices if judge.own_drafter(c.flags)):
        found = _blocks(block, judge)
        fences += [f for f in found if isinstance(f, str)]
        points += [p for p in found if not isinstance(p, str) and _key(p.flags) not in {_key(q.flags) for q in points}]
    if not stepped:
        fences.append("no drafter that drafts in steps: no step counts are searched")
        return SearchSpace(points=points, fences=fences)
    widest = max(stepped, key=lambda c: int(c.flags[STEPS]))
    algorithm = widest.flags[ALGO]
    top = int(widest.flags[STEPS])
    fences.append(f"step counts 1..{top}: no setting the evidence supports drafts more than {top} steps "
                  f"({widest.label}: {'; '.join(widest.why[:1])})")
    for steps in range(1, top + 1):
        point = _step_point(steps, algorithm, widest, judge)
        if isinstance(point, str):
            fences.append(point)
        elif _key(point.flags) not in {_key(p.flags) for p in points}:
            points.append(point)
    adaptive = _adaptive(answer, judge, next((c for c in stepped if c.flags.get(TOPK, "1") == "1"), None))
    (fences.append if isinstance(adaptive, str) else points.append)(adaptive)  # type: ignore[arg-type]
    return SearchSpace(points=points, fences=fences, max_steps=top, algorithm=algorithm)


def outside(space: SearchSpace, choice: SpecChoice) -> str | None:
    """Why ``choice`` (a --mtp-steps entry, judged) is outside the space, citing the fence; None: inside."""
    if _key(choice.flags) in {_key(p.flags) for p in space.points}:
        return None
    steps = choice.flags.get(STEPS, "")
    if space.max_steps is not None and steps.isdigit() and int(steps) > space.max_steps:
        return next(f for f in space.fences if f.startswith("step counts"))
    return (f"{setting_label(choice.flags)} is none of the space's settings (step counts at topk 1 and the "
            f"evidence's own settings: {', '.join(p.label for p in space.points)})")
