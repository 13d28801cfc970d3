"""The checkpoint's own drafter as a setting: DSPARK when the checkpoint bundles a DSpark drafter.

A user who asks for MTP wants the drafter the checkpoint carries switched on. When no launch recipe
and no MTP fallback of the hooks gives a setting this checkpoint can serve, its bundled DSpark
drafter does: the algorithm that loads it (read from SGLang's draft-architecture rule), its block size
from ``config.json`` (SGLang verifies block size + 1 draft tokens), and the draft path left to
SGLang, which defaults it to the target checkpoint when it bundles one.
"""
from __future__ import annotations

from pathlib import Path

from tools.checkpoint.facts import DRAFTER_WORDS, Drafter
from tools.checkpoint.sglang_rules import dspark_draft_default
from tools.mtp.answer import Recommendation
from tools.mtp.pick import ALGO, DSPARK_BLOCK, Judge
from tools.source.origin import Origin


def _config_line(config: str, key: str) -> Origin:
    """Where ``key`` is written in the checkpoint's config.json (its first line when not found)."""
    try:
        lines = Path(config).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    at = next((n for n, line in enumerate(lines, 1) if f'"{key}"' in line), 1)
    return Origin(path=config, line=at)


def bundled_drafter(judge: Judge) -> Drafter | None:
    """The carried drafter that an algorithm names (a bundled DSpark drafter), or None."""
    facts = judge.checkpoint
    return next((d for d in facts.drafters if d.carried and d.algorithms), None) if facts else None


def from_checkpoint(judge: Judge, package_dir: Path) -> tuple[Recommendation | None, str]:
    """The bundled drafter's setting, checked against the hooks' rules; or None and why not."""
    drafter = bundled_drafter(judge)
    if drafter is None:
        return None, ""
    flags = {ALGO: drafter.algorithms[0]}
    default = dspark_draft_default(str(package_dir))
    origins: dict[str, Origin] = {ALGO: default} if default else {}
    rationale = [f"the checkpoint carries its own drafter: {drafter.how}",
                 f"{ALGO} {flags[ALGO]} loads {drafter.draft_architecture}; SGLang defaults its draft path to the "
                 f"target checkpoint when it bundles one" + (f" ({default.cite()})" if default else "")]
    if drafter.block_size is not None and DSPARK_BLOCK in {f for f in judge.flags_to_fields}:
        flags[DSPARK_BLOCK] = str(drafter.block_size)
        origins[DSPARK_BLOCK] = _config_line(judge.checkpoint.config, "dspark_block_size") if judge.checkpoint \
            else Origin(path="config.json", line=1)
        rationale.append(f"{DSPARK_BLOCK} {drafter.block_size}: the checkpoint's dspark_block_size; SGLang verifies "
                         f"{drafter.block_size + 1} draft tokens (block size + 1) and fixes steps and topk at 1")
    verdict = judge.check(flags)
    if verdict.problems:
        text, rule = verdict.problems[0]
        return None, f"the checkpoint's {flags[ALGO]} drafter breaks a rule: {text} ({rule.origin.cite()})"
    rationale += [f"holds: {r.rule} ({r.origin.cite()})" for r in verdict.holds]
    origin = origins.get(ALGO) or next(iter(origins.values()), Origin(path="config.json", line=1))
    return Recommendation(flags=flags, env={}, rationale=rationale, origin=origin, flag_origins=origins), ""


def why_this_drafter(judge: Judge, algorithm: str) -> str | None:
    """In words: why "MTP" became this algorithm for the checkpoint in hand (None: no checkpoint read)."""
    facts = judge.checkpoint
    drafter = facts.drafter_for(algorithm) if facts else None
    if facts is None or drafter is None:
        return None
    others = [d for d in facts.drafters if d is not drafter]
    missing = [f"{'does not carry' if d.carried is False else 'is not shown to carry'} "
               f"{DRAFTER_WORDS[d.kind]}" for d in others if not d.carried]
    both = [DRAFTER_WORDS[d.kind] for d in others if d.carried]
    return (f"MTP for this checkpoint means the drafter it carries: {DRAFTER_WORDS[drafter.kind]}, which "
            f"{algorithm} loads" + (f"; it {' and '.join(missing)}" if missing else "")
            + (f"; it also carries {', '.join(both)}, measured as another variant" if both else ""))
