"""Choosing the recommendation: a recipe, rewritten as SGLang would and checked, or the hooks' own choice.

Every recipe of the pool is *considered*: its ``--speculative-*`` flags (aliases spelled as their
field's flag; flags no SGLang field defines dropped), SGLang's rewrites applied, every applicable
rule checked. A recipe that some applicable rule rejects is never recommended. Among the rest the
closest to the target hardware wins, then the fewest steps (the most conservative).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field as dc_field
from pathlib import Path

from tools.mtp.answer import Dropped, Recommendation
from tools.mtp.pick import ALGO, DRAFT, DSPARK_BLOCK, STEPS, Finding, InputValue, Judge, Verdict, hardware_score
from tools.recipes import Recipe
from tools.source.fields import FieldCatalog
from tools.source.origin import Origin
from tools.source.pysource import parse_file


@dataclass
class Considered:
    recipe: Recipe
    flags: dict[str, str]
    origins: dict[str, Origin]
    rationale: list[str] = dc_field(default_factory=list)
    verdict: Verdict = dc_field(default_factory=Verdict)
    undecided: list[Finding] = dc_field(default_factory=list)
    dropped: list[Dropped] = dc_field(default_factory=list)
    transferable: bool = True
    written: dict[str, str] = dc_field(default_factory=dict)   # the --speculative-* flags as the recipe writes them
    rewrites: list[str] = dc_field(default_factory=list)       # SGLang's rewrites of them, each with its rule
    unusable: list[str] = dc_field(default_factory=list)       # why it cannot be recommended as it stands
    needs: dict[str, str] = dc_field(default_factory=dict)     # flag -> environment variable the user must set
    needs_origins: dict[str, Origin] = dc_field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.flags[STEPS]) if self.flags.get(STEPS, "").isdigit() else 99


def speculative_flags(recipe: Recipe, fields: FieldCatalog) -> tuple[dict[str, str], dict[str, Origin], list[Dropped]]:
    """The recipe's --speculative-* flags under their field's own flag; ones no field defines are dropped."""
    by_flag = fields.by_flag()
    flags: dict[str, str] = {}
    origins: dict[str, Origin] = {}
    dropped: list[Dropped] = []
    for flag, value in recipe.flags.items():
        if not flag.startswith("--speculative-"):
            continue
        definition = by_flag.get(flag)
        origin = recipe.flag_origins.get(flag, recipe.origin)
        if definition is None:
            where = "the argument fields of this tree" if fields.files else "no readable argument fields"
            dropped.append(Dropped(kind="flag", name=flag, value=value, origin=origin, reason=(
                f"no SGLang argument field defines it (checked against {len(by_flag)} flags in {where})")))
            continue
        primary = definition.flags[0] if definition.flags else flag
        flags[primary], origins[primary] = value, origin
    return flags, origins, dropped


def consider(recipe: Recipe, judge: Judge, fields: FieldCatalog, exact: bool, arch: str | None) -> Considered:
    flags, origins, dropped = speculative_flags(recipe, fields)
    seen = Considered(recipe, flags, origins, dropped=dropped,
                      written={k: v for k, v in recipe.flags.items() if k.startswith("--speculative-")})
    seen.rationale.append(f"recipe {recipe.name} ({recipe.origin.cite()}) for {recipe.model}"
                          + ("" if exact else f", same architecture {arch}")
                          + f", hardware {recipe.hardware or 'unspecified'}"
                          + (f", the variant for {recipe.condition}" if recipe.condition else ""))
    seen.rationale += [f"dropped {d.name} {d.value} ({d.origin.cite() if d.origin else '?'}): {d.reason}"
                       for d in dropped]
    by_flag = fields.by_flag()
    for flag, expression in recipe.unread_flags.items():
        if flag.startswith("--speculative-"):
            seen.unusable.append(f"{flag} is `{expression}` ({recipe.launch.cite()}), which static reading cannot "
                                 "resolve to a value: not recommended with a guess")
    needs: dict[str, str] = {}
    for flag, variable in recipe.needs.items():
        if flag.startswith("--speculative-"):
            definition = by_flag.get(flag)
            primary = definition.flags[0] if definition is not None and definition.flags else flag
            flags[primary] = InputValue(f"${variable}")  # the rules see it given; its value is the user's
            needs[primary] = variable
            seen.needs_origins[primary] = recipe.needs_origins.get(flag, recipe.launch)
    early = judge.before_alias(flags)  # SGLang's order: these see the algorithm as written
    early_verdict = judge.check(flags, only=early)
    before = len(seen.rationale)
    judge.resolve_alias(flags, origins, seen.rationale, seen.undecided)
    if not exact:
        seen.transferable = _transferable(flags, recipe, judge, seen.undecided)
        _own_block_size(flags, origins, judge, seen.rationale)
    problem = judge.drafter_problem(flags)
    if problem:
        seen.unusable.append(problem)
    judge.fill_automatic(flags, origins, seen.rationale, seen.undecided)
    judge.repair(flags, origins, seen.rationale, seen.undecided)
    seen.rewrites = seen.rationale[before:]
    seen.verdict = judge.check(flags, skip=early)
    seen.verdict.problems[:0] = [(f"{text}; {judge.order_note(rule, seen.written)}", rule)
                                 for text, rule in early_verdict.problems]
    seen.verdict.undecided[:0] = early_verdict.undecided
    seen.verdict.holds[:0] = early_verdict.holds
    for flag, variable in needs.items():
        if flag in flags:  # still wanted after SGLang's rewrites (a draft-path fallback would have dropped it)
            seen.needs[flag] = variable
            del flags[flag]
            origins.pop(flag, None)
    return seen


def _own_block_size(flags: dict[str, str], origins: dict[str, Origin], judge: Judge, rationale: list[str]) -> None:
    """Another model's DSpark recipe drafts with this checkpoint's drafter, so its block size is the checkpoint's."""
    drafter = judge.own_drafter(flags)
    if drafter is None or drafter.block_size is None or DSPARK_BLOCK not in flags:
        return
    if flags[DSPARK_BLOCK] != str(drafter.block_size):
        rationale.append(f"{DSPARK_BLOCK} {flags[DSPARK_BLOCK]} of the recipe replaced by the checkpoint's own "
                         f"{drafter.block_size} ({drafter.cites[0] if drafter.cites else 'config.json'})")
    flags[DSPARK_BLOCK] = str(drafter.block_size)
    origins.pop(DSPARK_BLOCK, None)


def _transferable(flags: dict[str, str], recipe: Recipe, judge: Judge, undecided: list[Finding]) -> bool:
    """A recipe of another model with the same architecture carries over only when its draft is the
    target checkpoint's own: MTP (the hooks take the draft from the target checkpoint) or the drafter the
    checkpoint in hand bundles (DSPARK), with no draft path of its own (copying another model's
    separate draft would be the classic mistake)."""
    if judge.own_drafter(flags) is not None:
        return True
    fallback = [r for r in judge.applying(flags, ("draft_path_fallback",), undecided) if r.architectures]
    return bool(fallback) and flags.get(DRAFT) in (None, recipe.model)


# Ties between algorithms that the evidence uses equally often: a draft trained for the target (an
# MTP head or an EAGLE draft) before a separate small model, before n-gram lookup.
ALGORITHM_PREFERENCE = ("EAGLE", "EAGLE3", "DSPARK", "FROZEN_KV_MTP", "DFLASH", "STANDALONE", "NGRAM")


def best(considered: list[Considered], gpu: str | None, gpus: int | None) -> Considered | None:
    """The pick rule, stated in the rationale of what it picks: among recipes that can be recommended
    (no rule rejects them, every value resolved), complete ones before ones that need an input; the
    closest to the target hardware; then the algorithm the evidence uses most for this model there
    (distinct files, then recipes), so that like is compared with like; then the fewest steps."""
    usable = [c for c in considered if c.transferable and not c.verdict.problems and c.flags.get(ALGO)
              and not c.unusable]
    if not usable:
        return None
    complete = [c for c in usable if not c.needs]
    pool = complete or usable
    scores = {id(c): hardware_score(c.recipe.hardware, c.recipe.tp, gpu, gpus, c.recipe.condition) for c in pool}
    top_score = max(scores.values())
    top = [c for c in pool if scores[id(c)] == top_score]
    by_algorithm: dict[str, list[Considered]] = {}
    for c in top:
        by_algorithm.setdefault(c.flags[ALGO], []).append(c)

    def weight(algorithm: str) -> tuple[int, int, int]:
        group = by_algorithm[algorithm]
        order = ALGORITHM_PREFERENCE.index(algorithm) if algorithm in ALGORITHM_PREFERENCE else len(ALGORITHM_PREFERENCE)
        return len({c.recipe.origin.path for c in group}), len(group), -order

    ranked = sorted(by_algorithm, key=weight, reverse=True)
    algorithm = ranked[0]
    chosen = sorted(by_algorithm[algorithm], key=lambda c: c.steps)[0]
    counts = "; ".join(f"{a} in {weight(a)[0]} file(s), {weight(a)[1]} recipe(s)" for a in ranked)
    rule = (f"pick rule: of {len(usable)} usable recipe(s)"
            + (f", the {len(complete)} complete one(s) (no input left to the user)" if complete and len(complete) <
               len(usable) else "")
            + f", the {len(top)} closest to the target hardware"
            + (f" (score {top_score})" if gpu or gpus else " (no target GPU given: all equal)")
            + f"; then the algorithm the evidence uses most for this model there, like for like: {counts}")
    if len(ranked) > 1 and weight(ranked[0])[:2] == weight(ranked[1])[:2]:
        rule += f" (a tie, broken by preference for a trained draft: {', '.join(ALGORITHM_PREFERENCE)})"
    chosen.rationale.append(rule + f"; then the fewest {STEPS} within {algorithm}")
    distinct = sorted({c.steps for c in by_algorithm[algorithm] if c.steps != 99})
    if len(distinct) > 1:
        chosen.rationale.append(f"evidence disagrees on {STEPS} ({', '.join(map(str, distinct))}); "
                                f"chose the most conservative, {chosen.steps}")
    return chosen


def recommendation(seen: Considered) -> Recommendation:
    checked = [f"holds: {r.rule} ({r.origin.cite()})" for r in seen.verdict.holds]
    needed = [f"you must give {flag}: {seen.recipe.name} takes it from ${variable} ({seen.needs_origins[flag].cite()}), "
              "which has no default; set it to the value for your setup" for flag, variable in seen.needs.items()]
    return Recommendation(flags=dict(seen.flags), env={}, rationale=seen.rationale + checked + needed,
                          origin=seen.recipe.origin, flag_origins=dict(seen.origins), dropped=list(seen.dropped),
                          needs=dict(seen.needs), needs_origins=dict(seen.needs_origins))


def from_hooks(arch: str, judge: Judge, root: Path | None = None,
               package_dir: Path | None = None) -> tuple[Recommendation | None, list[Finding], str]:
    """No usable recipe: the architecture's MTP head is in the checkpoint and the hooks choose params.
    The third value says why there is no recommendation from the hooks, when there is none."""
    undecided: list[Finding] = []
    lookup: list[Finding] = []  # rules for algorithms we do not choose: not findings about the answer
    fallback = [r for r in judge.applying({}, ("draft_path_fallback",), lookup) if r.architectures]
    if not fallback:
        return None, undecided, "no MTP fallback in the hooks for this architecture"
    has = f"the hooks give {arch} the draft-path fallback ({fallback[0].origin.cite()})"
    allowed = next((r.values for r in judge.applying({}, ("allowed_algorithms", "requires"), lookup)
                    if r.literal and r.field == "speculative_algorithm"), None)
    family = fallback[0].algorithms or []
    options = [a for a in (allowed or family) if a in family and a != "None"] if family else (allowed or [])
    refused = {a: judge.drafter_problem({ALGO: a}) for a in options}
    if options and all(refused.values()):
        return None, undecided, f"{has}, but {refused[options[0]]}"
    options = [a for a in options if not refused[a]]
    if not options:
        return None, undecided, f"{has}, but no algorithm it covers is allowed for {arch}"
    flags: dict[str, str] = {ALGO: options[0]}
    origins: dict[str, Origin] = {ALGO: fallback[0].origin}
    rationale = [f"no usable launch recipe for this model or architecture in the tree; {arch} keeps its MTP draft "
                 f"in the checkpoint ({fallback[0].origin.cite()}), so {options[0]} needs no {DRAFT}"]
    drafter = judge.checkpoint.drafter_for(options[0]) if judge.checkpoint else None
    if drafter is not None:
        rationale.append(f"the checkpoint in hand {'presumably ' if drafter.presumed else ''}carries it: {drafter.how}")
    judge.fill_automatic(flags, origins, rationale, undecided)
    if STEPS not in flags:
        missing = missing_helper(fallback[0].origin, root, package_dir) if root and package_dir else None
        return None, undecided, f"{has}, but " + (missing or "no automatic steps/topk/draft tokens for it could "
                                                  "be read from the hooks")
    judge.repair(flags, origins, rationale, undecided)
    verdict = judge.check(flags)
    if verdict.problems:
        text, rule = verdict.problems[0]
        return None, undecided + verdict.undecided, f"{has}, but its automatic choice breaks a rule: {text} " \
                                                    f"({rule.origin.cite()})"
    rationale += [f"holds: {r.rule} ({r.origin.cite()})" for r in verdict.holds]
    auto_origin = origins.get(STEPS, fallback[0].origin)
    return Recommendation(flags=flags, env={}, rationale=rationale, origin=auto_origin, flag_origins=origins), \
        undecided + verdict.undecided, ""


def missing_helper(at: Origin, root: Path, package_dir: Path) -> str | None:
    """Where the hook file imports the function that chooses the automatic steps (``steps, topk,
    tokens = helper(server_args)``) from a module of the tree that does not define it: a tree whose
    files come from different commits. The words for that, or None."""
    path = root / at.path
    try:
        tree = parse_file(path)[0]
    except (OSError, SyntaxError, ValueError):
        return None
    imported: dict[str, tuple[str, int]] = {}
    chooser: str | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and "speculative_num_steps" in ast.unparse(node.targets[0]):
            chooser = node.value.func.id
    if chooser is None or chooser not in imported:
        return None
    module, line = imported[chooser]
    parts = module.split(".")
    if parts[0] != package_dir.name:
        return None
    target = package_dir.joinpath(*parts[1:])
    source = next((c for c in (target.with_suffix(".py"), target / "__init__.py") if c.is_file()), None)
    where = f"{at.path}:{line}"
    if source is None:
        return f"the helper that chooses them, {chooser}, is imported from {module} ({where}), which is not in this tree"
    try:
        defined = {n.name for n in parse_file(source)[0].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        defined |= {a.asname or a.name for n in parse_file(source)[0].body if isinstance(n, ast.ImportFrom)
                    for a in n.names}
    except (OSError, SyntaxError, ValueError):
        return None
    if chooser in defined:
        return None
    rel = source.relative_to(root).as_posix()
    return (f"the helper that chooses its automatic steps/topk/draft tokens, {chooser}, is imported from {module} "
            f"({where}) and {rel} does not define it: the tree's files come from different commits (the fallback "
            f"is there, its helper is not); use a checkout whose files come from one commit")
