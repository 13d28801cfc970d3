"""Choosing and checking a speculative configuration against the rules read from the tree.

``check`` lists every violation of an enforced rule (unconditional, applicable to the
architecture and algorithm, with literal values); a recommendation with a violation is never
returned. ``repair`` applies the rewrites SGLang itself would apply (topk-1 draft tokens, the
draft-path fallback) so that the flags we write say what the server will actually run.
"""
from __future__ import annotations

import re

from tools.constraints.extract import Rule
from tools.source.origin import Origin

ALGO, STEPS, TOPK, TOKENS, DRAFT = ("--speculative-algorithm", "--speculative-num-steps",
                                    "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                                    "--speculative-draft-model-path")


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def enforced(rules: list[Rule], arch: str | None, algorithm: str | None) -> list[Rule]:
    return [r for r in rules if r.condition is None and r.applies(arch, algorithm)]


def _literal(rule: Rule) -> list[str] | None:
    """The allowed values of a rule written with constants; None for expressions we cannot check."""
    clean = [v for v in rule.values if v != "None"]
    return clean if rule.literal and clean else None


def check(flags: dict[str, str], rules: list[Rule], arch: str | None) -> list[tuple[str, Rule]]:
    algorithm = flags.get(ALGO)
    problems: list[tuple[str, Rule]] = []
    for rule in enforced(rules, arch, algorithm):
        if rule.kind == "allowed_algorithms" and algorithm is not None:
            allowed = _literal(rule)
            if allowed and algorithm not in allowed:
                problems.append((f"{ALGO} {algorithm} is not allowed (only {', '.join(allowed)})", rule))
        elif rule.kind == "requires" and rule.field and flag(rule.field) in flags:
            allowed = _literal(rule)
            if allowed and flags[flag(rule.field)] not in allowed:
                problems.append((f"{flag(rule.field)} {flags[flag(rule.field)]} must be {' or '.join(allowed)}", rule))
        elif rule.kind == "topk1_draft_tokens" and flags.get(TOPK) == "1" and flags.get(STEPS, "").isdigit():
            if flags.get(TOKENS) != str(int(flags[STEPS]) + 1):
                problems.append((f"{TOKENS} must be {STEPS} + 1 when topk is 1", rule))
        elif rule.kind == "all_or_none":
            present = [flag(f) in flags for f in rule.values]
            if any(present) and not all(present):
                problems.append((f"{', '.join(flag(f) for f in rule.values)} must be given together", rule))
    return problems


def repair(flags: dict[str, str], origins: dict[str, Origin], rules: list[Rule], arch: str | None,
           rationale: list[str]) -> None:
    """Apply SGLang's own rewrites in place, recording each with its citation."""
    algorithm = flags.get(ALGO)
    for rule in enforced(rules, arch, algorithm):
        if rule.kind == "requires" and rule.field and flag(rule.field) in flags:
            allowed = _literal(rule)
            if allowed and len(allowed) == 1 and flags[flag(rule.field)] != allowed[0] and rule.field != "speculative_algorithm":
                rationale.append(f"{flag(rule.field)} set to {allowed[0]}: {rule.rule} ({rule.origin.cite()})")
                flags[flag(rule.field)] = allowed[0]
                origins[flag(rule.field)] = rule.origin
    for rule in enforced(rules, arch, algorithm):
        if rule.kind == "topk1_draft_tokens" and flags.get(TOPK) == "1" and (flags.get(STEPS) or "").isdigit():
            wanted = str(int(flags[STEPS]) + 1)
            if flags.get(TOKENS) != wanted:
                rationale.append(f"{TOKENS} set to {wanted} (= steps + 1): {rule.rule} ({rule.origin.cite()})")
                flags[TOKENS] = wanted
                origins[TOKENS] = rule.origin
        elif rule.kind == "draft_path_fallback" and DRAFT in flags:
            rationale.append(f"{DRAFT} dropped: {rule.rule} ({rule.origin.cite()})")
            del flags[DRAFT]
            origins.pop(DRAFT, None)


def hardware_score(hardware: str | None, tp: int | None, gpu: str | None, gpus: int | None) -> int:
    """Closeness of a recipe's hardware hint to the target: GPU model, GPU count, TP size."""
    text = (hardware or "").lower()
    score = 0
    if gpu:
        tokens = [t for t in re.findall(r"[a-z]*\d+[a-z]*", gpu.lower()) if len(t) >= 3]
        if any(re.search(rf"(?<![a-z0-9]){re.escape(t)}(?![a-z0-9])", text) for t in tokens):
            score += 4
    if gpus:
        if f"{gpus}-gpu" in text:
            score += 2
        if tp == gpus:
            score += 1
        elif tp is not None and tp > gpus:
            score -= 8  # needs more GPUs than the target has
    return score
