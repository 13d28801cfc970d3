"""Which of the tree's constraints bear on the chosen setting, and the rest counted by topic.

A person reading the evidence wants the rules that could change this answer first: those about the
chosen algorithm, the architecture or a flag the setting sets. A rule that names only other
algorithms (DFLASH, NGRAM, ...) or another feature (LoRA, HiCache, NVFP4, ...) is counted under its
topic and folded; ``--json`` and ``mtp.json`` keep every one.
"""
from __future__ import annotations

import re

from tools.mtp.answer import Constraint, MtpAnswer
from tools.source.fields import flag_field

ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "FROZEN_KV_MTP")
TOPICS = ("UNO", "DFLASH", "NGRAM", "EAGLE3", "STANDALONE", "LoRA", "NVFP4", "HiCache", "attn_dp", "MoE", "lmcache",
          "pp_size", "disaggregation", "unified_memory")


def _named_algorithms(rule: str) -> set[str]:
    return {a for a in ALGORITHMS if re.search(rf"(?<![A-Z0-9_]){a}(?![A-Z0-9_])", rule)}


def bears(constraint: Constraint, algorithm: str | None, flags: list[str], architecture: str | None) -> bool:
    rule = constraint.rule
    named = _named_algorithms(rule)
    if algorithm and named and algorithm not in named:
        return False
    fields = [flag_field(f) for f in flags]
    when = re.search(r"when (.*)\]\s*$", rule)
    if when and not any(f in when.group(1) for f in fields if f != "speculative_algorithm"):
        return False  # a rule for another feature being on (LoRA, HiCache, DP attention, ...)
    return bool((architecture and architecture in rule) or (algorithm and algorithm in named)
                or any(f in rule for f in fields))


def split_constraints(answer: MtpAnswer) -> tuple[list[Constraint], dict[str, int]]:
    """(the constraints bearing on the recommendation, {topic: count} of the others)."""
    rec = answer.recommended
    algorithm = rec.flags.get("--speculative-algorithm") if rec else None
    flags = list(rec.flags) if rec else []
    bearing, folded = [], {}
    for constraint in answer.constraints:
        if bears(constraint, algorithm, flags, answer.architecture):
            bearing.append(constraint)
            continue
        topic = next((t for t in TOPICS if t.lower() in constraint.rule.lower()), "other settings")
        folded[topic] = folded.get(topic, 0) + 1
    return bearing, folded


def folded_line(folded: dict[str, int]) -> str:
    if not folded:
        return ""
    parts = ", ".join(f"{topic} {n}" for topic, n in sorted(folded.items(), key=lambda kv: -kv[1]))
    return f"{sum(folded.values())} more constraints that do not bear on this setting ({parts}): --json lists them all"
