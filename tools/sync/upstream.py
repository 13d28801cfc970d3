"""The sync tool: fast-forward the SGLang checkout, then say what changed for the target model.

Order: check + fetch + decide (refusals change nothing) → read the evidence on the tree as it
is, unless a previous answer was given → fast-forward → dependency pins, files that matter, and
the evidence on the new tree diffed against the previous answer.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError
from tools.checkpoint.architecture import decide_architecture
from tools.checkpoint.config import CheckpointConfig, config_path, read_config
from tools.defaults import DEFAULT_MODEL
from tools.mtp.settings import MtpSettingsArgs
from tools.sync.gitpython import git
from tools.sync.deps import DependencyReport, dependency_report
from tools.sync.evidence import EvidenceRun, load_answer, run_evidence
from tools.sync.impact import ImpactFile, impact_files, model_terms
from tools.sync.pull import PullPlan, PullResult, apply_pull, forget_fetch, plan_pull
from tools.sync.recommendation_diff import RecommendationDiff, diff_recommendations
from tools.sync.repo import changed_paths, git_refusal, list_commits, open_checkout, read_blob


class SyncArgs(BaseModel):
    """Fast-forward an SGLang git checkout from its upstream (never resets, stashes, rebases or forces)
    and report what matters for the target model: new commits, moved dependency pins with the
    reinstall command, changed files that concern the model, and how the MTP recommendation changed."""

    sglang: str = Field(description="Path of the SGLang git checkout (or any folder inside it)")
    remote: str = Field("origin", description="Remote to fetch from")
    branch: str = Field("main", description="Upstream branch; the checked-out branch must track remote/branch")
    allow_dirty: bool = Field(False, description="Pull despite local changes when the incoming commits do not touch them")
    model: str = Field(DEFAULT_MODEL, description="Target model id or path")
    architecture: str | None = Field(None, description="HF architecture, e.g. DeepseekV4ForCausalLM; None = inferred")
    model_path: str | None = Field(None, description="Local checkpoint folder with config.json")
    config: CheckpointConfig | None = Field(None, description="Its config.json as a campaign already read it; "
                                                              "None = read here")
    gpu: str | None = Field(None, description="GPU name for the evidence engine, e.g. H200")
    gpus: int | None = Field(None, description="Number of GPUs for the evidence engine")
    sglang_python: str = Field("python3", description="Interpreter that has SGLang installed (for the reinstall command)")
    previous_answer: str | None = Field(None, description="mtp.json of an earlier run to diff against; None = "
                                                          "the evidence on the checkout before pulling")
    report_from: str | None = Field(None, description="Report changes since this commit (a sync resumed after it "
                                                      "already fast-forwarded)")
    mtp: MtpSettingsArgs | None = Field(None, description="What the MTP settings are judged on (a campaign's own "
                                                          "inputs); None = the fields above, on this checkout")
    fetch_timeout_s: float = Field(120.0, description="Seconds before a silent remote counts as not answering")


class SyncResult(BaseModel):
    pull: PullResult
    reported_from: str = Field(description="The commit the report starts from (old HEAD)")
    dependencies: DependencyReport = Field(default_factory=DependencyReport)
    terms: list[str] = Field(default_factory=list, description="Name fragments used to match the model")
    impact: list[ImpactFile] = Field(default_factory=list)
    evidence_before: EvidenceRun
    evidence_after: EvidenceRun
    recommendation: RecommendationDiff
    summary: str


def _model_names(args: SyncArgs) -> tuple[str | None, str | None]:
    """(architecture, model_type) of the target: what a campaign already decided and read (``args.mtp``,
    ``args.config``), else config.json read here, decided by the one documented order
    (tools/checkpoint/architecture.py: config.json, then --arch)."""
    config = args.config
    if config is None and args.model_path and config_path(args.model_path).is_file():
        config = read_config(args.model_path)
    decided = args.mtp.architecture if args.mtp and args.mtp.architecture else \
        decide_architecture(args.model, args.architecture, config)
    return decided.name, (config.flat.get("model_type") if config else None)


def _is_ancestor(repo: git.Repo, older: str, newer: str) -> bool:
    try:
        repo.git.merge_base("--is-ancestor", older, newer)
        return True
    except git.GitCommandError:
        return False


def _summary(result: SyncResult) -> str:
    pulled = result.pull
    if pulled.status == "ahead":
        head = f"{pulled.branch} is {pulled.ahead_by} commit(s) ahead of {pulled.upstream}; nothing to pull"
    elif pulled.status == "up_to_date" and result.reported_from == pulled.new_head:
        head = f"{pulled.branch} is up to date with {pulled.upstream} ({pulled.new_head[:12]})"
    else:
        head = (f"{pulled.branch}: {result.reported_from[:12]} → {pulled.new_head[:12]}, "
                f"{len(pulled.commits)} new commit(s)")
    parts = [head]
    if result.dependencies.changes:
        key = sorted({c.package for c in result.dependencies.changes if c.key})
        parts.append(f"{len(result.dependencies.changes)} dependency pin(s) moved"
                     + (f" ({', '.join(key)})" if key else ""))
    if result.impact:
        parts.append(f"{len(result.impact)} changed file(s) matter for the target model")
    diff = result.recommendation
    if diff.status == "changed" and diff.recommended_before and not diff.recommended_after:
        parts.append(f"recommendation withdrawn: the new tree no longer supports it ({len(diff.constraints)} "
                     "constraint change(s))")
    elif diff.status == "changed":
        parts.append(f"recommendation changed ({len(diff.flags)} flag(s), {len(diff.env)} env, "
                     f"{len(diff.constraints)} constraint(s))")
    elif diff.status == "unchanged":
        parts.append("recommendation unchanged")
    elif diff.status == "not_available":
        parts.append(f"recommendation not compared: {diff.note}")
    return "; ".join(parts)


def sync_upstream(args: SyncArgs) -> SyncResult:
    repo = open_checkout(args.sglang)
    try:
        return _sync(repo, args)
    except git.GitCommandError as err:  # one no step expected: still one line, never a traceback
        raise ToolError(git_refusal(Path(repo.working_tree_dir or args.sglang), err)) from None
    finally:
        repo.close()  # gitpython keeps cat-file helpers alive until closed


def _sync(repo: git.Repo, args: SyncArgs) -> SyncResult:
    plan = plan_pull(repo, args.remote, args.branch, args.allow_dirty, args.fetch_timeout_s)
    try:
        return _after_plan(repo, args, plan)
    finally:
        forget_fetch(repo, args.remote, args.branch)  # whatever happened, no private ref is left


def _after_plan(repo: git.Repo, args: SyncArgs, plan: PullPlan) -> SyncResult:
    top = repo.working_tree_dir
    arch, model_type = _model_names(args)
    given = dict(arch=arch, model_path=args.model_path, gpu=args.gpu, gpus=args.gpus)
    inputs = args.mtp or MtpSettingsArgs(sglang=top, model=args.model, **{k: v for k, v in given.items() if v is not None})

    if args.previous_answer:
        before = load_answer(args.previous_answer)
    elif plan.relation == "behind":
        before = run_evidence(inputs, f"checkout before pulling ({plan.old_head[:12]})")
    else:
        before = EvidenceRun(status="skipped", reason="nothing to pull and no previous answer given")

    pulled = apply_pull(repo, plan)
    head = pulled.new_head if pulled.status == "fast_forwarded" else repo.head.commit.hexsha
    start = pulled.old_head
    if (pulled.status != "fast_forwarded" and args.report_from and args.report_from != head
            and _is_ancestor(repo, args.report_from, head)):
        start = repo.commit(args.report_from).hexsha  # resumed: the fast-forward happened last time
        pulled.commits = list_commits(repo, start, head)
        pulled.changed_files = changed_paths(repo, start, head)

    moved = start != head
    if moved or before.status == "ok":
        after = run_evidence(inputs, f"checkout after pulling ({head[:12]})")
    else:
        after = EvidenceRun(status="skipped", reason="no new commits")

    answer_arch = (after.answer or {}).get("architecture") or (before.answer or {}).get("architecture")
    terms = model_terms(args.model, arch or answer_arch, model_type)
    by_path: dict[str, list[str]] = {}
    for commit in pulled.commits:
        for path in commit.files:
            by_path.setdefault(path, []).append(commit.short)
    impact = impact_files(pulled.changed_files, terms,
                          lambda p: read_blob(repo, head, p) or read_blob(repo, start, p), by_path)
    deps = (dependency_report(repo, start, head, pulled.changed_files, args.sglang_python)
            if moved else DependencyReport())

    if after.status == "ok":
        diff = diff_recommendations(before.answer if before.status == "ok" else None, after.answer)
        if before.status == "failed":
            diff.note = f"no previous answer: {before.reason}"
    elif after.status == "skipped":
        diff = RecommendationDiff(status="unchanged", note="no new commits: the recommendation cannot have changed")
    else:
        diff = RecommendationDiff(status="not_available", note=after.reason)

    result = SyncResult(pull=pulled, reported_from=start, dependencies=deps, terms=terms, impact=impact,
                        evidence_before=before, evidence_after=after, recommendation=diff, summary="")
    result.summary = _summary(result)
    return result


SYNC_UPSTREAM = Tool(name="sync_upstream", args=SyncArgs, run=sync_upstream)
