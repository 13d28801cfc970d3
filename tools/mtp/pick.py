"""Checking a speculative configuration against the rules read from the tree, condition by condition.

A ``Judge`` holds the rules, the architecture and SGLang's field definitions. For one set of flags
it decides, per rule in scope, whether the rule's condition holds (``tools/constraints/condition``):
a rule that holds is applied — rewrites SGLang itself performs (aliases, the automatic
steps/topk/draft tokens, the topk-1 draft-token rewrite, the draft-path fallback) are made in the
flags with their citation, checks that fail reject the configuration; a rule whose condition (or
whose verdict) cannot be decided is not applied and is reported as a ``Finding``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field as dc_field

from tools.checkpoint.facts import CheckpointFacts, Drafter
from tools.constraints.condition import GIVEN, Facts, decide, typed_value
from tools.constraints.rules import Rule
from tools.source.fields import FieldCatalog, field_flag, flag_field
from tools.source.origin import Origin

ALGO, STEPS, TOPK, TOKENS, DRAFT = ("--speculative-algorithm", "--speculative-num-steps",
                                    "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                                    "--speculative-draft-model-path")
DSPARK_BLOCK = "--speculative-dspark-block-size"
TRIO = (STEPS, TOPK, TOKENS)
CHECKS = ("allowed_algorithms", "requires", "forbids", "all_or_none")


class InputValue(str):
    """A flag value only the user can give (the recipe reads it from an environment variable with no
    default): the rules see the setting as given, its value unknown. Never written into a script."""


def condition(rule: Rule, facts: Facts) -> bool | None:
    """Whether the rule's own tests hold. A gate (its function's callers' guard) only ever excludes:
    known false, the rule is out; unknown, the function is taken as reached, the normal path."""
    if rule.gate and decide([rule.gate], facts) is False:
        return False
    return decide(rule.tests, facts, rule.bindings)


@dataclass
class Finding:
    """A rule that bears on the flags but was not applied: its condition or its verdict is undecidable."""

    rule: Rule
    why: str

    def note(self) -> str:
        return f"not applied: {self.rule.rule} ({self.rule.origin.cite()}): {self.why}"


@dataclass
class Verdict:
    """What the rules say about one configuration after SGLang's rewrites were applied to it."""

    problems: list[tuple[str, Rule]] = dc_field(default_factory=list)
    undecided: list[Finding] = dc_field(default_factory=list)
    holds: list[Rule] = dc_field(default_factory=list)   # checks that bear on the flags and pass


class Judge:
    def __init__(self, rules: list[Rule], architecture: str | None, fields: FieldCatalog | None = None,
                 checkpoint: CheckpointFacts | None = None):
        self.rules, self.architecture, self.checkpoint = rules, architecture, checkpoint
        self.fields = fields.by_name() if fields is not None else {}
        self.flags_to_fields = {f: d.name for f, d in fields.by_flag().items()} if fields is not None else {}

    def facts(self, flags: dict[str, str]) -> Facts:
        given = {}
        for flag, value in flags.items():
            name = self.flags_to_fields.get(flag, flag_field(flag))
            given[name] = GIVEN if isinstance(value, InputValue) else typed_value(value, self.fields.get(name))
        return Facts(architecture=self.architecture, given=given, fields=self.fields)

    def in_scope(self, flags: dict[str, str], kinds: tuple[str, ...]) -> list[Rule]:
        return [r for r in self.rules if r.kind in kinds and r.applies(self.architecture, flags.get(ALGO))]

    def condition(self, rule: Rule, flags: dict[str, str]) -> bool | None:
        return condition(rule, self.facts(flags))

    def applying(self, flags: dict[str, str], kinds: tuple[str, ...], undecided: list[Finding]) -> list[Rule]:
        """Rules of these kinds whose condition holds; undecidable ones go to ``undecided``."""
        return self.applying_among(self.in_scope(flags, kinds), flags, undecided)

    def applying_among(self, rules: list[Rule], flags: dict[str, str], undecided: list[Finding]) -> list[Rule]:
        found = []
        for rule in rules:
            holds = self.condition(rule, flags)
            if holds:
                found.append(rule)
            elif holds is None:
                undecided.append(Finding(rule, f"its condition `{rule.condition}` cannot be decided statically"))
        return found

    # ---- the checkpoint in hand ------------------------------------------------------------------
    def drafter_problem(self, flags: dict[str, str]) -> str | None:
        """Why the checkpoint cannot serve these flags' draft (None: it can, or the draft is a separate model)."""
        algorithm = flags.get(ALGO)
        if self.checkpoint is None or not algorithm or flags.get(DRAFT) not in (None, self.checkpoint.folder):
            return None
        return self.checkpoint.refusal(algorithm)

    def own_drafter(self, flags: dict[str, str]) -> Drafter | None:
        """The drafter the checkpoint carries that these flags name by algorithm (DSPARK's bundled drafter)."""
        algorithm = flags.get(ALGO)
        if self.checkpoint is None or not algorithm or DRAFT in flags:
            return None
        drafter = self.checkpoint.drafter_for(algorithm)
        return drafter if drafter is not None and drafter.carried and algorithm in drafter.algorithms else None

    # ---- rewrites SGLang applies ---------------------------------------------------------------
    def resolve_alias(self, flags: dict[str, str], origins: dict[str, Origin], rationale: list[str],
                      undecided: list[Finding]) -> None:
        """The first alias (in source order) whose condition holds rewrites the algorithm; an alias whose
        condition cannot be decided is skipped and reported (the algorithm stays as written)."""
        algorithm = flags.get(ALGO)
        for rule in self.in_scope(flags, ("alias",)):
            if algorithm not in rule.values[1:]:
                continue
            holds = self.condition(rule, flags)
            if holds is None:
                undecided.append(Finding(rule, f"its condition `{rule.condition}` cannot be decided statically; "
                                         f"{algorithm} kept as written"))
            elif holds:
                target = rule.values[0]
                if target != algorithm:
                    rationale.append(f"{ALGO} {algorithm} written as {target}: {rule.rule} ({rule.origin.cite()})")
                    flags[ALGO], origins[ALGO] = target, rule.origin
                return

    def fill_automatic(self, flags: dict[str, str], origins: dict[str, Origin], rationale: list[str],
                       undecided: list[Finding]) -> None:
        """Steps/topk/draft tokens all unset: SGLang's automatic choice for this architecture, made explicit."""
        if any(f in flags for f in TRIO) or ALGO not in flags:
            return
        autos = [r for r in self.in_scope(flags, ("auto_default",))
                 if r.values and all(v.partition("=")[0].startswith("speculative_") for v in r.values)]
        auto = next(iter(self.applying_among(autos, flags, undecided)), None)
        if auto is None:
            return
        for pair in auto.values:
            name, _, value = pair.partition("=")
            flags[field_flag(name)], origins[field_flag(name)] = value, auto.origin
        rationale.append(f"steps/topk/draft tokens are SGLang's automatic choice: {', '.join(auto.values)} "
                         f"({auto.origin.cite()})")

    def repair(self, flags: dict[str, str], origins: dict[str, Origin], rationale: list[str],
               undecided: list[Finding]) -> None:
        """The topk-1 draft-token rewrite and the draft-path fallback, as SGLang applies them."""
        for rule in self.applying(flags, ("topk1_draft_tokens", "draft_path_fallback"), undecided):
            if rule.kind == "topk1_draft_tokens" and flags.get(TOPK) == "1" and flags.get(STEPS, "").isdigit():
                wanted = str(int(flags[STEPS]) + 1)
                if flags.get(TOKENS) != wanted:
                    rationale.append(f"{TOKENS} set to {wanted} (= steps + 1): {rule.rule} ({rule.origin.cite()})")
                    flags[TOKENS], origins[TOKENS] = wanted, rule.origin
            elif rule.kind == "draft_path_fallback" and DRAFT in flags:
                rationale.append(f"{DRAFT} dropped: {rule.rule} ({rule.origin.cite()})")
                del flags[DRAFT]
                origins.pop(DRAFT, None)

    def before_alias(self, flags: dict[str, str]) -> list[Rule]:
        """Checks SGLang runs before it resolves the algorithm's alias (pipeline order read from the tree:
        DeepSeek-V4's model hook refuses NEXTN before handle_speculative_decoding would make it EAGLE)."""
        algorithm = flags.get(ALGO)
        aliases = [r for r in self.in_scope(flags, ("alias",)) if algorithm in r.values[1:] and r.stage is not None]
        if not aliases:
            return []
        first = min(r.stage for r in aliases)  # type: ignore[type-var]
        return [r for r in self.in_scope(flags, CHECKS) if r.stage is not None and r.stage < first]

    def order_note(self, rule: Rule, flags: dict[str, str]) -> str:
        alias = min((r for r in self.in_scope(flags, ("alias",)) if r.stage is not None), key=lambda r: r.stage or 0)
        return (f"checked as written: {rule.stage_step} ({rule.stage_origin.cite() if rule.stage_origin else '?'}) "
                f"runs before {alias.stage_step} ({alias.stage_origin.cite() if alias.stage_origin else '?'}) resolves "
                f"the alias ({alias.origin.cite()})")

    # ---- checks ---------------------------------------------------------------------------------
    def check(self, flags: dict[str, str], only: list[Rule] | None = None,
              skip: list[Rule] | None = None) -> Verdict:
        """The checks in scope (or ``only`` those; never those in ``skip``) against these flags."""
        verdict = Verdict()
        facts = self.facts(flags)
        skipped = {id(r) for r in skip or []}
        rules = [r for r in (self.in_scope(flags, CHECKS) if only is None else only) if id(r) not in skipped]
        for rule in rules:
            holds = condition(rule, facts)
            if holds is False:
                continue
            problem = self._problem(rule, flags, facts)
            if problem is None:
                verdict.undecided.append(Finding(rule, "whether it rejects these flags cannot be decided statically"))
            elif problem and holds:
                verdict.problems.append((problem, rule))
            elif problem:
                verdict.undecided.append(Finding(rule, f"it would reject these flags ({problem}), but its condition "
                                                       f"`{rule.condition}` cannot be decided statically"))
            elif holds and _bears(rule, flags):
                verdict.holds.append(rule)
        return verdict

    def _problem(self, rule: Rule, flags: dict[str, str], facts: Facts) -> str | None:
        """'' when the rule passes, a description when it rejects, None when that cannot be told."""
        if rule.kind == "all_or_none":
            present = [field_flag(f) in flags for f in rule.values]
            return f"{', '.join(field_flag(f) for f in rule.values)} must be given together" \
                if any(present) and not all(present) else ""
        if rule.kind in ("allowed_algorithms", "requires") and (rule.field is None or field_flag(rule.field) not in flags):
            return ""  # about a setting these flags do not make
        if rule.trigger is None:
            return ""
        rejects = decide([rule.trigger], facts, rule.bindings)
        if not rejects:
            return None if rejects is None else ""
        if rule.kind == "allowed_algorithms":
            return f"{ALGO} {flags[ALGO]} is not allowed (only {', '.join(v for v in rule.values if v != 'None')})"
        if rule.kind == "requires" and rule.field:
            return f"{field_flag(rule.field)} {flags[field_flag(rule.field)]} must be {' or '.join(rule.values)}"
        return f"rejected: {rule.rule}"


def _bears(rule: Rule, flags: dict[str, str]) -> bool:
    if rule.kind == "all_or_none":
        return any(field_flag(f) in flags for f in rule.values)
    return rule.field is not None and field_flag(rule.field) in flags


def hardware_score(hardware: str | None, tp: int | None, gpu: str | None, gpus: int | None,
                   condition: str | None = None) -> int:
    """Closeness of a recipe's hardware hint to the target: GPU model, GPU count, TP size; a variant
    for other hardware than the target's (``is_hip()`` on an H200) is far from it."""
    text = (hardware or "").lower()
    score = 0
    if gpu:
        tokens = [t for t in re.findall(r"[a-z]*\d+[a-z]*", gpu.lower()) if len(t) >= 3]
        if any(re.search(rf"(?<![a-z0-9]){re.escape(t)}(?![a-z0-9])", text) for t in tokens):
            score += 4
        if condition and branch_fits(condition, gpu) is False:
            score -= 8
    if gpus:
        if f"{gpus}-gpu" in text:
            score += 2
        if tp == gpus:
            score += 1
        elif tp is not None and tp > gpus:
            score -= 8  # needs more GPUs than the target has
    return score


# What a hardware predicate of SGLang's asks, as GPU names that answer yes
_FAMILIES = {
    "blackwell": r"\b(g?b[123]\d\d|rtx ?50\d\d|blackwell)\b", "sm100": r"\b(g?b[123]\d\d|blackwell)\b",
    "sm10": r"\b(g?b[123]\d\d|blackwell)\b", "hopper": r"\b(g?h[12]\d{1,2}|h800|hopper)\b",
    "sm90": r"\b(g?h[12]\d{1,2}|h800|hopper)\b", "ampere": r"\b(a[1-9]\d{1,3}|ampere)\b",
    "hip": r"\b(mi\d{3}\w*|instinct|amd|radeon)\b", "rocm": r"\b(mi\d{3}\w*|instinct|amd|radeon)\b",
    "in_amd_ci": r"\b(mi\d{3}\w*|instinct|amd|radeon)\b", "amd": r"\b(mi\d{3}\w*|instinct|amd|radeon)\b",
    "cuda": r"\b(nvidia|geforce|tesla|[abhl]\d{2,4}|gb\d{3})\b", "npu": r"\b(ascend|npu)\b",
}


def branch_fits(condition: str, gpu: str) -> bool | None:
    """Whether a variant's hardware condition (``is_blackwell()``, ``not is_hip()``) holds on that GPU;
    None when it says nothing we can match (an unknown predicate, a compound condition)."""
    match = re.fullmatch(r"(not )?_?is_(\w+?)(?:_supported|_system)?\(\)", condition.strip())
    if match is None:
        return None
    family = _FAMILIES.get(match.group(2).lower())
    if family is None:
        return None
    fits = re.search(family, gpu.lower()) is not None
    return fits != bool(match.group(1))
