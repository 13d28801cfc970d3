"""The MTP settings of a campaign, worked out in one call: the evidence answer, the hook rules, and every
speculative setting to measure (recommended, the other evidence settings, the user's ``--mtp-steps``),
each judged by those rules for the inputs named here. Callers take this result instead of judging again,
so the CLI's check, the step and the measure plan cannot disagree."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pydantic import BaseModel, Field

from tools.checkpoint.facts import CheckpointFacts
from tools.child_env import child_env
from tools.constraints.extract import ExtractConstraintsArgs, Rule, extract_constraints
from tools.defaults import SGLANG_PYTHON, SGLANG_VERSION
from tools.measure.client import package_dir
from tools.base import ToolError
from tools.checkpoint.architecture import Architecture
from tools.mtp.search_space import SearchSpace, fence, outside
from tools.mtp.variants import SpecChoice, evidence_choices, parse_user_setting, user_choices
from tools.mtp.infer import InferMtpArgs, MtpAnswer, Recommendation, SourceRef, infer_mtp

CALLS_ENV = "DSV4_MTP_SETTINGS_CALLS"  # a file: each call appends one line (tests count the calls)


class MtpSettingsArgs(BaseModel):
    """What the MTP settings are judged on: the model, the SGLang tree, the target GPUs, the user's own settings."""

    model: str = Field(description="HF model id (or local path) to serve")
    arch: str | None = Field(None, description="Architecture, e.g. DeepseekV4ForCausalLM, when no config.json")
    model_path: str | None = Field(None, description="Local checkpoint folder holding config.json")
    sglang: str | None = Field(None, description="SGLang checkout or package dir; None = auto-resolve")
    sglang_python: str = Field(SGLANG_PYTHON, description="Interpreter that has SGLang installed")
    version: str = Field(SGLANG_VERSION, description="PyPI version used when the source must be downloaded")
    gpu: str | None = Field(None, description="Target GPU name, e.g. 'NVIDIA H200'")
    gpus: int | None = Field(None, description="Number of GPUs on the target")
    tp: int | None = Field(None, description="Tensor-parallel size of the servers")
    mtp_steps: list[str] = Field(default_factory=list, description="--mtp-steps entries: S or S/K/D")
    mtp_variants: int | None = Field(None, description="--mtp-variants: how many evidence settings to keep")
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint's facts, when already read")
    architecture: Architecture | None = Field(None, description="The architecture, when already decided (a "
                                              "campaign's preflight); None: decided by the evidence, same order")
    search: bool = Field(False, description="A budgeted search (--budget): measure the fenced space "
                         "(tools/mtp/search_space.py); a --mtp-steps entry outside it is refused")


class MtpSettings(BaseModel):
    """The judged settings. ``answer`` and ``rules`` are large and stay out of a dump (the step writes the
    answer to mtp.json for the reader); what later steps need is the rest."""

    inputs: MtpSettingsArgs
    source: SourceRef
    architecture: str | None
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint in hand, as the evidence read it")
    recommended: Recommendation | None = Field(description="The evidence's recommendation (variant 'mtp')")
    choices: list[SpecChoice] = Field(description="Settings to measure: recommended first, then evidence, hooks, user")
    left_out: list[str] = Field(default_factory=list, description="Evidence settings not measured, and why")
    no_evidence: str | None = Field(None, description="Why there is nothing to measure, and the fix (None: there is)")
    space: SearchSpace | None = Field(None, description="The fenced search space (a budgeted search only)")
    answer: MtpAnswer | None = Field(None, exclude=True, description="The whole evidence answer (this process only)")
    rules: list[Rule] = Field(default_factory=list, exclude=True, description="The hook rules (this process only)")


def tree_commit(root: Path | str) -> str | None:
    """HEAD of the git checkout at ``root`` (None: not a checkout), read as the source resolver reads it."""
    if not (Path(root) / ".git").exists():
        return None
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, env=child_env())
    return done.stdout.strip() or None if done.returncode == 0 else None


def judged_on(found: MtpSettings | None, args: MtpSettingsArgs) -> bool:
    """``found`` answers ``args``: the same typed inputs, and its tree still at the commit it was read at."""
    return (found is not None and found.answer is not None and found.inputs == args
            and found.source.commit == tree_commit(found.source.root))


def hook_rules(root: Path | str) -> list[Rule]:
    """SGLang's argument-hook rules in the tree at ``root``."""
    return extract_constraints(ExtractConstraintsArgs(root=str(root), package_dir=str(package_dir(root)))).rules


def mtp_settings(args: MtpSettingsArgs) -> MtpSettings:
    """ToolError (one line: the problem and the fix) for an unusable tree or a --mtp-steps entry the hooks forbid."""
    if os.environ.get(CALLS_ENV):
        with open(os.environ[CALLS_ENV], "a") as calls:
            calls.write(f"{args.model} {','.join(args.mtp_steps)}\n")
    for entry in args.mtp_steps:
        parse_user_setting(entry)  # a malformed entry is refused before the tree is read
    answer = infer_mtp(InferMtpArgs(sglang=args.sglang, model=args.model, arch=args.arch, model_path=args.model_path,
                                    gpu=args.gpu, gpus=args.gpus, sglang_python=args.sglang_python,
                                    version=args.version, checkpoint=args.checkpoint,
                                    architecture=args.architecture))
    rules = hook_rules(answer.source.root)
    choices, left_out = evidence_choices(answer, rules, args.gpu, args.gpus, cap=args.mtp_variants)
    space = fence(answer, rules, choices) if args.search else None
    mine = user_choices(args.mtp_steps, answer, rules, choices)
    if space is not None:
        for choice in mine:
            fenced = outside(space, choice)
            if fenced:
                raise ToolError(f"--mtp-steps {choice.label} is outside the search space --budget measures: {fenced}; "
                                "pick a setting inside it (plan.md lists them) or drop --budget")
        choices = list(space.points)
    else:
        choices += mine
    missing = no_mtp_evidence(answer, args) if answer.recommended is None else None
    return MtpSettings(inputs=args, source=answer.source, architecture=answer.architecture, checkpoint=answer.checkpoint,
                       recommended=answer.recommended, choices=choices, left_out=left_out, no_evidence=missing,
                       space=space,
                       answer=answer, rules=rules)


def no_mtp_evidence(answer: MtpAnswer, args: MtpSettingsArgs) -> str:
    """One line: what was searched for the model's speculative settings, and the ways on."""
    source = answer.source
    tree = f"SGLang {source.version or '(version unknown)'} ({source.kind} at {source.root})"
    searched = "its launch recipes with speculative flags and its argument hooks"
    if answer.architecture is None:
        given = f"--model-path {args.model_path} has no config.json" if args.model_path else \
            "no --model-path with a config.json"
        why = (f"the architecture of {args.model} is unknown ({given}, no --arch, and no model in the tree "
               "matches its name)")
        fix = ("pass --arch CLASS (e.g. DeepseekV4ForCausalLM) or --model-path DIR holding its config.json, "
               "or run a goal without MTP (e.g. \"tune kernels\" or \"benchmark\")")
    elif answer.checkpoint is not None and answer.checkpoint.drafters and not answer.checkpoint.carried():
        why = "the checkpoint carries no drafter SGLang can load: " + "; ".join(answer.checkpoint.lines()[1:])
        fix = ("point --model-path at a checkpoint with an MTP head or a bundled DSpark drafter, or run a goal "
               "without MTP (e.g. \"tune kernels\" or \"benchmark\")")
    else:
        rejected = [c for c in answer.candidates if c.rejected]
        why = (f"every recipe for {answer.architecture} breaks a rule of the hooks ({len(rejected)} rejected)"
               if rejected and len(rejected) == len(answer.candidates) else
               f"no recipe for {args.model} or its architecture {answer.architecture}, and no MTP default in "
               "the hooks")
        fix = (f"`dsv4-agent mtp {args.model}` shows the evidence; give --mtp-steps to measure settings of your "
               "own, or run a goal without MTP (e.g. \"tune kernels\" or \"benchmark\")")
    return f"the goal asks for MTP, but {tree} has no speculative evidence for {args.model}: searched {searched}; " \
           f"{why}; {fix}"
