"""Infer the speculative-decoding (MTP) flags for a model from the SGLang tree, with citations.

Evidence, all read from the resolved source: launch recipes (registered tests, fixtures, nightly
launch settings), constraints (argument hooks, each with its condition), and SGLang's argument
fields (which flags exist, their types and defaults). ``recommended`` is a recipe for this model
(or, when it is MTP, for another model of the same architecture) closest to the target hardware,
or the hooks' own automatic parameters made explicit; rewritten as SGLang would and checked
against every rule whose condition holds. Rules whose condition cannot be decided are not applied
and are listed in ``unknowns``; with an unknown architecture nothing is recommended.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool
from tools.defaults import SGLANG_PYTHON, SGLANG_VERSION
from tools.constraints.extract import ExtractConstraintsArgs, extract_constraints
from tools.mtp.answer import (Candidate, Constraint, Dropped, MtpAnswer, Recommendation, SourceRef,
                              Verification)
from tools.checkpoint.config import config_path
from tools.checkpoint.facts import CheckpointFacts
from tools.checkpoint.read import ReadCheckpointArgs, read_checkpoint
from tools.checkpoint.architecture import Architecture, decide_architecture, from_mentions, from_tree
from tools.mtp.choose import Considered, best, consider, from_hooks, recommendation
from tools.mtp.drafter_choice import from_checkpoint, why_this_drafter
from tools.mtp.env import EnvVetter, redacted
from tools.mtp.misses import explain as explain_misses
from tools.mtp.pick import Judge
from tools.recipes import ExtractRecipesArgs, Recipe, extract_recipes
from tools.recipes.model import same_model
from tools.source.fields import FieldCatalog, read_fields
from tools.source.pysource import gc_paused
from tools.source.research_cache import ResearchScope
from tools.source.resolve import ResolveSourceArgs, SourceInfo, resolve_source

__all__ = ["InferMtpArgs", "MtpAnswer", "Recommendation", "Candidate", "Constraint", "SourceRef", "Verification",
           "infer_mtp", "INFER_MTP"]


class InferMtpArgs(BaseModel):
    """Infer --speculative-* (MTP) server flags for a model from SGLang's tests, fixtures and hooks, every value cited."""

    sglang: str | None = Field(None, description="SGLang checkout or package dir; None = auto-resolve")
    model: str = Field(description="HF model id (or local path) to serve")
    arch: str | None = Field(None, description="Architecture, e.g. DeepseekV4ForCausalLM, when no config.json")
    gpu: str | None = Field(None, description="Target GPU name, e.g. 'NVIDIA H200'")
    gpus: int | None = Field(None, description="Number of GPUs on the target")
    model_path: str | None = Field(None, description="Local checkpoint folder holding config.json")
    sglang_python: str = Field(SGLANG_PYTHON, description="Interpreter that has SGLang installed")
    version: str = Field(SGLANG_VERSION, description="PyPI version used when the source must be downloaded")
    lookup_timeout_s: float = Field(10, gt=0, description="How long --sglang-python may take to say where sglang is")
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint's facts when already read "
                                                                 "(else read here from model_path)")
    architecture: Architecture | None = Field(None, description="The architecture the caller decided (a campaign's "
                                                                "preflight); None: decided here by the same order")


def _checkpoint(args: InferMtpArgs, info: SourceInfo) -> CheckpointFacts | None:
    """The checkpoint in hand, when --model-path holds a config.json (ToolError when it is unreadable)."""
    if args.checkpoint is not None:
        return args.checkpoint
    if not args.model_path or not config_path(args.model_path).exists():
        return None
    return read_checkpoint(ReadCheckpointArgs(model_path=args.model_path, package_dir=info.package_dir))


def _architecture(args: InferMtpArgs, info: SourceInfo, notes: list[str],
                  checkpoint: CheckpointFacts | None) -> Architecture:
    """The architecture the caller decided, else decided here by the same order (tools/checkpoint/architecture.py)."""
    decided = args.architecture or decide_architecture(args.model, args.arch, checkpoint, info.root, info.package_dir)
    if decided.name is not None:
        notes.append(decided.line())
    if decided.disagreement():
        notes.append(decided.disagreement())
    return decided


def _same_architecture(recipes: list[Recipe], arch: str, info: SourceInfo) -> list[Recipe]:
    models = sorted({r.model for r in recipes if r.model})
    archs = {m: g[0] for m in models if (g := from_tree(m, info.root, info.package_dir))}
    archs.update({m: g[0] for m, g in from_mentions([m for m in models if m not in archs], info.root,
                                                    info.package_dir).items()})
    return [r for r in recipes if r.model and archs.get(r.model) == arch]


def _with_env(rec: Recommendation, candidate: Candidate, recipe: Recipe, exact: bool) -> None:
    """The recommendation takes its recipe's vetted environment (none from another model's recipe)."""
    rec.env, rec.env_evidence, rec.env_origins = dict(candidate.env_kept), dict(candidate.env_evidence), \
        dict(candidate.env_origins)
    if not exact:
        rec.dropped += [Dropped(kind="env", name=k, value=v, origin=recipe.env_origins.get(k), reason=(
            f"set for {recipe.model} by {recipe.name}; another checkpoint's settings are not carried over"))
            for k, v in redacted(recipe.env).items()]


def _candidate(seen: Considered, vetter: EnvVetter, exact: bool) -> tuple[Candidate, list[Dropped]]:
    r = seen.recipe
    kept, evidence, dropped = vetter.vet(r.env, r.env_origins, r.name) if exact else ({}, {}, [])
    if exact and r.unread_env:  # a variable SGLang reads whose value is not a value: not recommendable
        wanted, _, _ = vetter.vet({k: "?" for k in r.unread_env}, {}, r.name)
        seen.unusable += [f"environment {name} is `{r.unread_env[name]}` ({r.launch.cite()}), which static reading "
                          "cannot resolve to a value: not recommended with a guess" for name in wanted]
    candidate = Candidate(
        name=r.name, flags=dict(seen.flags), model=r.model or "", env=redacted(r.env), hardware=r.hardware,
        other_flags={k: v for k, v in r.flags.items() if not k.startswith("--speculative-")}, origin=r.origin,
        rejected=[f"{p} ({rule.origin.cite()})" for p, rule in seen.verdict.problems] + list(seen.unusable)
        + ([] if seen.transferable else ["not MTP (its draft is not taken from the target checkpoint): "
                                         "not carried over to another model"]),
        env_kept=kept, env_evidence=evidence, env_origins={k: r.env_origins.get(k, r.launch) for k in kept},
        written_flags=dict(seen.written), rewrites=list(seen.rewrites),
        unread={**r.unread_flags, **{k: v for k, v in r.unread_env.items()}}, needs=dict(seen.needs),
        condition=r.condition, complete=not seen.unusable and not seen.needs)
    return candidate, dropped


def _fields(info: SourceInfo, unknowns: list[str]) -> FieldCatalog:
    fields = read_fields(Path(info.package_dir), Path(info.root))
    if fields.damaged:
        unknowns.append(f"{', '.join(fields.damaged)} do not parse: flags defined there count as undefined")
    if not fields.fields:
        unknowns.append("no SGLang argument fields could be read (srt/arg_groups/fields, srt/server_args.py): "
                        "no flag can be checked, so none is recommended")
    return fields


def _assumed(args: InferMtpArgs, recommended: Recommendation) -> list[str]:
    """Without a checkpoint the answer rests on one: say which, and where it is checked."""
    if args.model_path and config_path(args.model_path).exists():
        return []
    return [f"checkpoint not read (no --model-path with a config.json): assumed {args.model} carries the drafter "
            f"{recommended.flags.get('--speculative-algorithm', 'this setting')} loads; the GPU host reads the "
            "checkpoint on `dsv4-agent resume RUN --model-path DIR` and refuses a drafter it lacks"]


def infer_mtp(args: InferMtpArgs) -> MtpAnswer:
    with gc_paused():  # parse-heavy: see tools/source/pysource.py
        return _infer_mtp(args)


def _infer_mtp(args: InferMtpArgs) -> MtpAnswer:
    info = resolve_source(ResolveSourceArgs(path=args.sglang, sglang_python=args.sglang_python, version=args.version,
                                            lookup_timeout_s=args.lookup_timeout_s))
    notes: list[str] = []
    unknowns: list[str] = list(info.notes)
    unknowns += [f"source lacks {', '.join(info.lacks)}: recipes there were not read"] if info.lacks else []
    fields = _fields(info, unknowns)
    scope = ResearchScope(info.root, info.package_dir)  # the tree is read (hashed) once for both
    constraint_result = extract_constraints(ExtractConstraintsArgs(root=info.root, package_dir=info.package_dir), scope)
    rules = constraint_result.rules
    unknowns += constraint_result.warnings
    recipes = extract_recipes(ExtractRecipesArgs(root=info.root, package_dir=info.package_dir,
                                                 speculative_only=True, max_recipes=5000), scope)
    unknowns += recipes.warnings
    checkpoint = _checkpoint(args, info)
    decided = _architecture(args, info, notes, checkpoint)
    arch = decided.name
    exact = [r for r in recipes.recipes if same_model(r.model, args.model)]
    pool = exact or (_same_architecture(recipes.recipes, arch, info) if arch else [])
    judge = Judge(rules, arch, fields, checkpoint)
    considered = [consider(r, judge, fields, bool(exact), arch) for r in pool]
    vetter = EnvVetter(Path(info.package_dir), Path(info.root), {n for r in pool for n in r.env} if exact else set())
    vetted = [_candidate(c, vetter, bool(exact)) for c in considered]
    applicable = [r for r in rules if r.applies(arch, None)] if arch else [r for r in rules if r.architectures is None]
    constraints = [Constraint(rule=r.rule, origin=r.origin) for r in applicable if r.kind != "default"]
    recommended, findings, no_hooks = None, [], "no MTP fallback in the hooks"
    if arch is None:
        scoped = [r for r in rules if r.needs_architecture()]
        unknowns.append(f"architecture of {args.model} unknown: {len(scoped)} rules in SGLang's hooks depend on it, "
                        "so nothing is recommended; pass --arch or --model-path with a config.json")
    elif fields.fields:
        chosen = best(considered, args.gpu, args.gpus)
        if chosen is not None:
            recommended, findings = recommendation(chosen), chosen.undecided + chosen.verdict.undecided
            candidate, env_dropped = vetted[considered.index(chosen)]
            _with_env(recommended, candidate, chosen.recipe, bool(exact))
            recommended.dropped += env_dropped
        else:
            recommended, findings, no_hooks = from_hooks(arch, judge, Path(info.root), Path(info.package_dir))
            if recommended is None:
                recommended, why_not = from_checkpoint(judge, Path(info.package_dir))
                no_hooks = f"{no_hooks}; {why_not}" if why_not else no_hooks
    unknowns += list(dict.fromkeys(f.note() for f in findings))
    if recommended is not None:
        why = why_this_drafter(judge, recommended.flags.get("--speculative-algorithm", ""))
        recommended.rationale = notes + ([why] if why else []) + recommended.rationale + _assumed(args, recommended)
    elif arch is not None:
        rejected = [c for c in considered if c.verdict.problems]
        unknowns.append(f"no evidence for a speculative configuration of {args.model} ({arch}): "
                        + (f"every recipe found breaks a rule ({len(rejected)} rejected, see candidates)"
                           if rejected and len(rejected) == len(considered) else
                           f"no usable recipe in the tree, and {no_hooks}"))
    unknowns += explain_misses(args.model, Path(info.root), Path(info.package_dir), [c for c, _ in vetted],
                               recipes.warnings, scope)
    return MtpAnswer(model=args.model, architecture=arch, architecture_decision=decided, checkpoint=checkpoint,
                     source=SourceRef(kind=info.kind, root=info.root, version=info.version, commit=info.commit),
                     candidates=[c for c, _ in vetted], constraints=constraints,
                     recommended=recommended, unknowns=unknowns)


INFER_MTP = Tool(name="infer_mtp", args=InferMtpArgs, run=infer_mtp)
