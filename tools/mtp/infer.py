"""Infer the speculative-decoding (MTP) flags for a model from the SGLang tree, with citations.

The answer combines three kinds of evidence, all read from the resolved source: launch recipes
(registered tests and fixtures), constraints (argument hooks), and the flag catalog (``Spec``
fields). ``recommended`` is either a recipe for this model/architecture, closest to the target
hardware, or — when no recipe exists but the hooks say the architecture's MTP head lives in the
checkpoint — the hooks' own automatic parameters made explicit. It is checked against every
enforced rule; when nothing supports a recommendation, it is null and ``unknowns`` says why.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.constraints.extract import ExtractConstraintsArgs, Rule, extract_constraints
from tools.source.origin import Origin
from tools.mtp.arch import from_config, from_tree
from tools.mtp.pick import (ALGO, DRAFT, STEPS, check, enforced, flag, hardware_score, repair)
from tools.source.pysource import gc_paused
from tools.recipes import ExtractRecipesArgs, Recipe, extract_recipes
from tools.source.resolve import ResolveSourceArgs, SourceInfo, resolve_source
from tools.source.spec_catalog import SpecCatalogArgs, spec_catalog


class InferMtpArgs(BaseModel):
    """Infer --speculative-* (MTP) server flags for a model from SGLang's tests, fixtures and hooks, every value cited."""

    sglang: str | None = Field(None, description="SGLang checkout or package dir; None = auto-resolve")
    model: str = Field(description="HF model id (or local path) to serve")
    arch: str | None = Field(None, description="Architecture, e.g. DeepseekV4ForCausalLM, when no config.json")
    gpu: str | None = Field(None, description="Target GPU name, e.g. 'NVIDIA H200'")
    gpus: int | None = Field(None, description="Number of GPUs on the target")
    model_path: str | None = Field(None, description="Local checkpoint folder holding config.json")
    sglang_python: str = Field("python3", description="Interpreter that has SGLang installed")
    version: str = Field("0.5.23", description="PyPI version used when the source must be downloaded")


class SourceRef(BaseModel):
    kind: Literal["checkout", "package", "wheel"]
    root: str
    version: str | None
    commit: str | None


class Candidate(BaseModel):
    flags: dict[str, str]
    other_flags: dict[str, str]
    env: dict[str, str]
    model: str
    hardware: str | None
    origin: Origin


class Constraint(BaseModel):
    rule: str
    origin: Origin


class Recommendation(BaseModel):
    flags: dict[str, str]
    env: dict[str, str]
    rationale: list[str]
    origin: Origin
    flag_origins: dict[str, Origin] = Field(description="Where each recommended flag's value comes from")


class MtpAnswer(BaseModel):
    model: str
    architecture: str | None
    source: SourceRef
    candidates: list[Candidate]
    constraints: list[Constraint]
    recommended: Recommendation | None
    unknowns: list[str]


def _canonical(flags: dict[str, str], aliases: dict[str, str]) -> dict[str, str]:
    return {aliases.get(k, k): v for k, v in flags.items()}


def _matches_model(recipe: Recipe, model: str) -> bool:
    if not recipe.model:
        return False
    a, b = recipe.model.lower().rstrip("/"), model.lower().rstrip("/")
    return a == b or a.split("/")[-1] == b.split("/")[-1]


def _architecture(args: InferMtpArgs, info: SourceInfo, notes: list[str]) -> str | None:
    if args.model_path:
        found = from_config(args.model_path)
        if found:
            notes.append(f"architecture {found[0]} read from {found[1]}")
            return found[0]
    if args.arch:
        notes.append(f"architecture {args.arch} given with --arch")
        return args.arch
    guessed = from_tree(args.model, info.root, info.package_dir)
    if guessed:
        notes.append(f"architecture {guessed[0]} matched from the model name to {guessed[1].cite()} "
                     "(no config.json given; pass --arch to override)")
        return guessed[0]
    return None


def _checked(flags: dict[str, str], rules: list[Rule], arch: str | None) -> list[str]:
    """Name the enforced rules that bear on the recommended flags (all of them hold)."""
    bearing = [r for r in enforced(rules, arch, flags.get(ALGO))
               if r.kind in ("allowed_algorithms", "topk1_draft_tokens", "all_or_none", "draft_path_fallback")
               or (r.kind == "requires" and r.literal and r.field and flag(r.field) in flags)]
    return [f"holds: {r.rule} ({r.origin.cite()})" for r in bearing]


def _from_recipe(recipe: Recipe, aliases: dict[str, str]) -> tuple[dict[str, str], dict[str, Origin]]:
    flags = {k: v for k, v in _canonical(recipe.flags, aliases).items() if k.startswith("--speculative-")}
    origins = {aliases.get(k, k): o for k, o in recipe.flag_origins.items()}
    return flags, {k: origins.get(k, recipe.origin) for k in flags}


def _transferable(flags: dict[str, str], recipe: Recipe, rules: list[Rule], arch: str | None,
                  algo_alias: dict[str, str]) -> bool:
    """A recipe of another model with the same architecture carries over only when it is MTP:
    an algorithm whose draft the hooks take from the target checkpoint, and no draft path of its own
    (copying another model's separate draft, or its DSPARK head, would be the classic mistake)."""
    algorithm = algo_alias.get(flags.get(ALGO, ""), flags.get(ALGO))
    fallback = [r for r in rules if r.kind == "draft_path_fallback" and r.condition is None and r.applies(arch, algorithm)
                and r.architectures]
    return bool(fallback) and flags.get(DRAFT) in (None, recipe.model)


def _pick_recipe(pool: list[Recipe], args: InferMtpArgs, arch: str | None, rules: list[Rule],
                 aliases: dict[str, str], algo_alias: dict[str, str], exact: bool) -> Recommendation | None:
    scored = []
    for recipe in pool:
        flags, origins = _from_recipe(recipe, aliases)
        if not exact and not _transferable(flags, recipe, rules, arch, algo_alias):
            continue
        rationale = [f"recipe {recipe.name} ({recipe.origin.cite()}) for {recipe.model}"
                     + ("" if exact else f", same architecture {arch}")
                     + f", hardware {recipe.hardware or 'unspecified'}"]
        if flags.get(ALGO) in algo_alias:
            alias_rule = next(r for r in rules if r.kind == "alias" and flags[ALGO] in r.values[1:])
            rationale.append(f"{ALGO} {flags[ALGO]} written as {algo_alias[flags[ALGO]]}: {alias_rule.rule} "
                             f"({alias_rule.origin.cite()})")
            flags[ALGO], origins[ALGO] = algo_alias[flags[ALGO]], alias_rule.origin
        repair(flags, origins, rules, arch, rationale)
        if check(flags, rules, arch):
            continue  # this recipe breaks a rule for this architecture: not a candidate for recommending
        rationale += _checked(flags, rules, arch)
        steps = int(flags[STEPS]) if flags.get(STEPS, "").isdigit() else 99
        score = hardware_score(recipe.hardware, recipe.tp, args.gpu, args.gpus)
        scored.append((score, steps, recipe, flags, origins, rationale))
    if not scored:
        return None
    best = max(s[0] for s in scored)
    top = sorted([s for s in scored if s[0] == best], key=lambda s: s[1])
    score, steps, recipe, flags, origins, rationale = top[0]
    distinct = sorted({s[1] for s in top if s[1] != 99})
    if len(distinct) > 1:
        rationale.append(f"evidence disagrees on {STEPS} ({', '.join(map(str, distinct))}); "
                         f"chose the most conservative, {steps}")
    return Recommendation(flags=flags, env=recipe.env, rationale=rationale, origin=recipe.origin,
                          flag_origins=origins)


def _from_hooks(arch: str | None, rules: list[Rule]) -> Recommendation | None:
    """No recipe: the architecture's NextN/MTP head is in the checkpoint and the hooks choose params."""
    fallback = [r for r in rules if r.kind == "draft_path_fallback" and r.condition is None and r.applies(arch, None)
                and r.architectures]
    if not fallback:
        return None
    allowed = next((r.values for r in enforced(rules, arch, None) if r.kind == "allowed_algorithms"), None)
    family = fallback[0].algorithms or []
    options = [a for a in (allowed or family) if a in family] if family else (allowed or [])
    if not options:
        return None
    algorithm = options[0]
    auto = next((r for r in enforced(rules, arch, algorithm) if r.kind == "auto_default"), None)
    if auto is None:
        return None
    flags: dict[str, str] = {ALGO: algorithm}
    origins: dict[str, Origin] = {ALGO: (next((r.origin for r in enforced(rules, arch, None)
                                              if r.kind == "allowed_algorithms"), fallback[0].origin))}
    for pair in auto.values:
        field, _, value = pair.partition("=")
        flags[flag(field)], origins[flag(field)] = value, auto.origin
    rationale = [f"no launch recipe for this model or architecture in the tree; {arch} keeps its MTP draft in the "
                 f"checkpoint ({fallback[0].origin.cite()}), so {algorithm} needs no {DRAFT}",
                 f"steps/topk/draft tokens are SGLang's automatic choice for {arch}: {', '.join(auto.values)} "
                 f"({auto.origin.cite()})"]
    repair(flags, origins, rules, arch, rationale)
    if check(flags, rules, arch):
        return None
    rationale += _checked(flags, rules, arch)
    return Recommendation(flags=flags, env={}, rationale=rationale, origin=auto.origin, flag_origins=origins)


def infer_mtp(args: InferMtpArgs) -> MtpAnswer:
    with gc_paused():  # parse-heavy: see tools/source/pysource.py
        return _infer_mtp(args)


def _infer_mtp(args: InferMtpArgs) -> MtpAnswer:
    info = resolve_source(ResolveSourceArgs(path=args.sglang, sglang_python=args.sglang_python, version=args.version))
    notes: list[str] = []
    unknowns: list[str] = [f"source lacks {', '.join(info.lacks)}: recipes there were not read"] if info.lacks else []
    arch = _architecture(args, info, notes)
    if arch is None:
        unknowns.append(f"architecture of {args.model} unknown: pass --arch or --model-path with a config.json")
    try:
        catalog = spec_catalog(SpecCatalogArgs(package_dir=info.package_dir, root=info.root))
        aliases = {a: f.flag for f in catalog.flags for a in f.aliases}
    except ToolError as err:
        aliases = {}
        unknowns.append(str(err))
    constraint_result = extract_constraints(ExtractConstraintsArgs(root=info.root, package_dir=info.package_dir))
    rules = constraint_result.rules
    unknowns += constraint_result.warnings
    algo_alias = {s: r.values[0] for r in rules if r.kind == "alias" for s in r.values[1:]}
    recipes = extract_recipes(ExtractRecipesArgs(root=info.root, package_dir=info.package_dir,
                                                 speculative_only=True, max_recipes=5000))
    unknowns += recipes.warnings
    exact = [r for r in recipes.recipes if _matches_model(r, args.model)]
    same_arch = [r for r in recipes.recipes if r not in exact and r.model and arch
                 and (g := from_tree(r.model, info.root, info.package_dir)) and g[0] == arch] if not exact else []
    pool = exact or same_arch
    candidates = []
    for r in pool:
        flags, _ = _from_recipe(r, aliases)
        candidates.append(Candidate(flags=flags, other_flags={k: v for k, v in _canonical(r.flags, aliases).items()
                                                              if k not in flags}, env=r.env, model=r.model or "",
                                    hardware=r.hardware, origin=r.origin))
    applicable = [r for r in rules if r.applies(arch, None)] if arch else [r for r in rules if r.architectures is None]
    constraints = [Constraint(rule=r.rule, origin=r.origin) for r in applicable if r.kind != "default"]
    recommended = _pick_recipe(pool, args, arch, rules, aliases, algo_alias, bool(exact)) if pool else None
    if recommended is None and arch:
        recommended = _from_hooks(arch, rules)
    if recommended is not None:
        recommended.rationale = notes + recommended.rationale
    else:
        unknowns.append(f"no evidence for a speculative configuration of {args.model}"
                        + (f" ({arch})" if arch else "") + ": no recipe in the tree and no MTP fallback in the hooks")
    return MtpAnswer(model=args.model, architecture=arch,
                     source=SourceRef(kind=info.kind, root=info.root, version=info.version, commit=info.commit),
                     candidates=candidates, constraints=constraints, recommended=recommended, unknowns=unknowns)


INFER_MTP = Tool(name="infer_mtp", args=InferMtpArgs, run=infer_mtp)
