"""Fast-forward-only pull of the SGLang checkout.

Whatever can be refused without the network (not a checkout, detached HEAD, no upstream, a merge
in progress) is refused before fetching. The fetch lands in a private ref (``refs/dsv4-agent/fetch/...``)
until the fast-forward is decided; the branch moves only by ``git merge --ff-only``, and one that
would replace an untracked or ignored file is refused. Nothing resets, stashes, rebases or forces:
a refusal leaves HEAD, index, working tree and stash as they were, and says what to do.
"""
from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import ToolError, cap_lines
from tools.sync.gitpython import git
from tools.sync.repo import (CommitInfo, changed_paths, dirty_paths, in_progress_operation, list_commits, redact_urls,
                             run_git)

PullStatus = Literal["fast_forwarded", "up_to_date", "ahead"]


class PullResult(BaseModel):
    checkout: str = Field(description="Top of the git working tree")
    branch: str
    upstream: str = Field(description="remote/branch that was fetched")
    status: PullStatus
    old_head: str
    new_head: str
    commits: list[CommitInfo] = Field(default_factory=list, description="New commits, newest first")
    changed_files: list[str] = Field(default_factory=list, description="Every path that differs old..new")
    dirty_kept: list[str] = Field(default_factory=list, description="Local changes left untouched (--allow-dirty)")
    ahead_by: int = Field(0, description="Local commits not upstream (status 'ahead')")
    shallow: bool = False


def _listing(paths: list[str], limit: int = 10) -> str:
    capped = cap_lines(paths, limit, 2000, what="paths")
    return ", ".join(capped.text.splitlines()) + (f" {capped.note}" if capped.truncated else "")


def check_branch(repo: git.Repo, remote: str, branch: str) -> str:
    """The checked-out branch name, if it tracks remote/branch; else a refusal saying what to do."""
    top = repo.working_tree_dir
    if repo.head.is_detached:
        raise ToolError(f"{top}: HEAD is detached at {repo.head.commit.hexsha[:12]}; sync moves a branch, "
                        f"not a detached HEAD: run `git -C {top} switch {branch}` and sync again")
    local = repo.active_branch
    if remote not in [r.name for r in repo.remotes]:
        known = ", ".join(r.name for r in repo.remotes) or "none"
        raise ToolError(f"{top}: no remote named {remote!r} (remotes: {known}); pass --remote NAME "
                        f"or add it with `git -C {top} remote add {remote} URL`")
    tracking = local.tracking_branch()
    if tracking is None:
        raise ToolError(f"{top}: branch {local.name!r} has no upstream configured; set it with "
                        f"`git -C {top} branch --set-upstream-to={remote}/{branch} {local.name}` and sync again")
    if tracking.remote_name != remote or tracking.remote_head != branch:
        raise ToolError(f"{top}: branch {local.name!r} tracks {tracking.name}, not {remote}/{branch}; pass "
                        f"--remote {tracking.remote_name} --branch {tracking.remote_head}, or switch to "
                        f"the branch that tracks {remote}/{branch}")
    return local.name


def private_ref(remote: str, branch: str) -> str:
    """Where a fetch lands until the fast-forward is decided: not refs/remotes/, not FETCH_HEAD."""
    return f"refs/dsv4-agent/fetch/{remote}/{branch}"


def fetch(repo: git.Repo, remote: str, branch: str, timeout_s: float) -> str:
    """Fetch remote/branch into ``private_ref``; return the fetched commit. A failure changes nothing.

    ``--refmap=`` stops git from also moving ``refs/remotes/<remote>/<branch>`` (its opportunistic
    update), ``--no-write-fetch-head`` keeps FETCH_HEAD: a refusal after fetching must leave both as
    they were. ``forget_fetch`` removes the private ref; ``apply_pull`` moves the remote-tracking ref.
    """
    top = repo.working_tree_dir
    url = redact_urls(repo.remote(remote).url)
    done = run_git(top, ["fetch", "--no-tags", "--no-write-fetch-head", "--refmap=", remote,
                         f"+refs/heads/{branch}:{private_ref(remote, branch)}"], timeout_s)
    if done.timed_out:
        raise ToolError(f"fetch from {remote} ({url}) did not finish within {timeout_s:.0f} s; the remote "
                        "does not answer: check the network or the remote URL (`git remote -v`), then sync "
                        "again. Nothing was changed.")
    if done.returncode != 0:
        last = [redact_urls(line) for line in done.output.strip().splitlines() if line.strip()][-2:] or ["no output"]
        raise ToolError(f"fetch from {remote} ({url}) failed: {' | '.join(last)}; check the network and "
                        "the remote URL (`git remote -v`), then sync again. Nothing was changed.")
    return repo.git.rev_parse(f"{private_ref(remote, branch)}^{{commit}}")


def forget_fetch(repo: git.Repo, remote: str, branch: str) -> None:
    """Drop the private ref (the fetched objects stay until git's own gc)."""
    run_git(repo.working_tree_dir, ["update-ref", "-d", private_ref(remote, branch)], 60)


def _in_the_way(top: str, old_paths: set[str], incoming: list[str]) -> list[str]:
    """Paths the fast-forward would create where a file the checkout does not track (untracked or
    ignored) sits, at the path itself or at one of its parent folders' names."""
    found = []
    for path in incoming:
        if path in old_paths:
            continue  # tracked now: the dirty check covers it
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            here = os.path.join(top, prefix)
            if (depth == len(parts) and os.path.lexists(here)) or (depth < len(parts) and os.path.lexists(here)
                                                                   and not os.path.isdir(here)):
                found.append(prefix)
                break
    return sorted(set(found))


def _relation(repo: git.Repo, old: str, new: str, upstream: str, shallow: bool) -> tuple[str, int, int]:
    """('equal'|'behind'|'ahead'|'diverged', local-only count, upstream-only count)."""
    if old == new:
        return "equal", 0, 0
    try:
        base = repo.git.merge_base(old, new)
    except git.GitCommandError:
        hint = (f" the clone is shallow and the histories meet below its edge: run "
                f"`git -C {repo.working_tree_dir} fetch --unshallow {upstream.split('/')[0]}`") if shallow else ""
        raise ToolError(f"HEAD and {upstream} share no history the checkout knows of;{hint or ' they are unrelated branches:'}"
                        f" sync only fast-forwards, so reconcile them yourself and sync again") from None
    local_only = int(repo.git.rev_list("--count", f"{new}..{old}"))
    upstream_only = int(repo.git.rev_list("--count", f"{old}..{new}"))
    if base == old:
        return "behind", 0, upstream_only
    if base == new:
        return "ahead", local_only, 0
    return "diverged", local_only, upstream_only


class PullPlan(BaseModel):
    """What a fast-forward would do, decided after fetching and before touching the branch."""
    checkout: str
    branch: str
    upstream: str
    remote: str = Field(description="Remote name")
    remote_branch: str = Field(description="Branch on the remote")
    relation: Literal["equal", "behind", "ahead"]
    old_head: str
    new_head: str
    ahead_by: int = 0
    incoming: list[str] = Field(default_factory=list)
    dirty: list[str] = Field(default_factory=list)
    shallow: bool = False


def plan_pull(repo: git.Repo, remote: str = "origin", branch: str = "main", allow_dirty: bool = False,
              fetch_timeout_s: float = 120.0) -> PullPlan:
    """Check, fetch and decide; raises ToolError for every refusal. Moves no branch."""
    top = repo.working_tree_dir
    local = check_branch(repo, remote, branch)
    busy = in_progress_operation(repo)
    if busy:
        raise ToolError(f"{top}: {busy} is in progress; finish or abort it yourself, then sync again")
    shallow = repo.git.rev_parse("--is-shallow-repository") == "true"
    old = repo.head.commit.hexsha
    new = fetch(repo, remote, branch, fetch_timeout_s)
    try:
        return _decide(repo, local, remote, branch, old, new, shallow, allow_dirty)
    except ToolError:
        forget_fetch(repo, remote, branch)  # a refusal leaves every ref as it was
        raise


def _decide(repo: git.Repo, local: str, remote: str, branch: str, old: str, new: str, shallow: bool,
            allow_dirty: bool) -> PullPlan:
    top = repo.working_tree_dir
    upstream = f"{remote}/{branch}"
    base = dict(checkout=top, branch=local, upstream=upstream, old_head=old, new_head=new, shallow=shallow,
                remote=remote, remote_branch=branch)

    relation, local_only, upstream_only = _relation(repo, old, new, upstream, shallow)
    if relation in ("equal", "ahead"):
        return PullPlan(relation=relation, ahead_by=local_only, **base)
    if relation == "diverged":
        raise ToolError(f"{top}: branch {local!r} and {upstream} have diverged ({local_only} local commit(s), "
                        f"{upstream_only} upstream); sync only fast-forwards: merge or rebase them yourself "
                        f"(e.g. `git -C {top} rebase {upstream}`), or keep your commits on another branch, "
                        "then sync again. Nothing was changed.")

    incoming = changed_paths(repo, old, new)
    dirty = dirty_paths(repo)
    if dirty and not allow_dirty:
        raise ToolError(f"{top}: the working tree has {len(dirty)} local change(s) ({_listing(dirty)}); "
                        "commit them, or pass --allow-dirty to pull anyway when the incoming commits do "
                        "not touch them (nothing is ever stashed). Nothing was changed.")
    overlap = sorted(set(dirty) & set(incoming))
    if overlap:
        raise ToolError(f"{top}: the incoming commits change {len(overlap)} file(s) you have local changes in "
                        f"({_listing(overlap)}); commit those changes or set them aside yourself, then sync "
                        "again. Nothing was changed.")
    tracked = set(repo.git.ls_tree("-r", "--name-only", "-z", old).split("\0"))
    in_the_way = [p for p in _in_the_way(top, tracked, incoming) if p not in dirty]
    if in_the_way:
        raise ToolError(f"{top}: the incoming commits add {len(in_the_way)} path(s) where you have a file git does "
                        f"not track (ignored, e.g. by .gitignore or .git/info/exclude): {_listing(in_the_way)}; a "
                        "fast-forward would replace it. Move it aside yourself, then sync again. Nothing was changed.")
    return PullPlan(relation="behind", incoming=incoming, dirty=dirty, **base)


def apply_pull(repo: git.Repo, plan: PullPlan) -> PullResult:
    """Fast-forward to the planned commit (``git merge --ff-only``), or report why nothing moved.

    Only once the branch is where it should be does ``refs/remotes/<remote>/<branch>`` move to the
    fetched commit (as ``git pull`` would leave it); a refusal leaves it as it was.
    """
    try:
        result = _fast_forward(repo, plan)
        run_git(plan.checkout, ["update-ref", f"refs/remotes/{plan.remote}/{plan.remote_branch}", plan.new_head], 60)
        return result
    finally:
        forget_fetch(repo, plan.remote, plan.remote_branch)


def _fast_forward(repo: git.Repo, plan: PullPlan) -> PullResult:
    base = dict(checkout=plan.checkout, branch=plan.branch, upstream=plan.upstream, old_head=plan.old_head,
                new_head=plan.new_head, shallow=plan.shallow)
    if plan.relation == "equal":
        return PullResult(status="up_to_date", **base)
    if plan.relation == "ahead":
        return PullResult(status="ahead", ahead_by=plan.ahead_by, **base)
    if repo.head.commit.hexsha != plan.old_head:
        raise ToolError(f"{plan.checkout}: HEAD moved while sync was running; sync again")
    try:
        repo.git.merge("--ff-only", "--no-edit", plan.new_head)
    except git.GitCommandError as err:
        # git checks before it writes: a refused fast-forward leaves the tree as it was.
        reason = (err.stderr or err.stdout or str(err)).strip().splitlines()[-1:] or ["unknown"]
        raise ToolError(f"{plan.checkout}: git refused the fast-forward ({reason[0].strip()}); resolve that "
                        "and sync again. Nothing was changed.") from None
    return PullResult(status="fast_forwarded", commits=list_commits(repo, plan.old_head, plan.new_head),
                      changed_files=plan.incoming, dirty_kept=plan.dirty, **base)


def pull(repo: git.Repo, remote: str = "origin", branch: str = "main", allow_dirty: bool = False,
         fetch_timeout_s: float = 120.0) -> PullResult:
    return apply_pull(repo, plan_pull(repo, remote, branch, allow_dirty, fetch_timeout_s))
