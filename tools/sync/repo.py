"""Open the SGLang git checkout and read facts from it (never changes anything).

The checkout is found from any folder inside it, but only accepted when it looks like SGLang
(``python/sglang/`` at its top): an installed package inside some other repository (a venv
inside a project) must never be mistaken for the checkout to pull.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.child_env import child_env
from tools.sync.gitpython import git

# Git must never stop to ask for a password or a host key: the agent runs unattended.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C"}


_URL_USERINFO = re.compile(r"(\w+://)[^/@\s'\"]+@")


def redact_urls(text: str) -> str:
    """Drop user:token@ from URLs: remote URLs may carry credentials, and messages reach run folders."""
    return _URL_USERINFO.sub(r"\1***@", text)


def open_checkout(path: str | Path) -> git.Repo:
    where = Path(path).expanduser()
    if not where.exists():
        raise ToolError(f"{where} does not exist; pass --sglang PATH to your SGLang git checkout")
    try:
        repo = git.Repo(where, search_parent_directories=True)
    except git.InvalidGitRepositoryError:
        raise ToolError(f"{where} is not inside a git repository; sync needs a clone "
                        "(git clone https://github.com/sgl-project/sglang) passed with --sglang PATH") from None
    if repo.bare or repo.working_tree_dir is None:
        raise ToolError(f"{where} is a bare git repository; pass the working checkout instead")
    top = Path(repo.working_tree_dir)
    try:
        repo.git.rev_parse("--is-inside-work-tree")  # git itself may refuse the repository (safe.directory)
    except git.GitCommandError as err:
        repo.close()
        raise ToolError(git_refusal(top, err)) from None
    if not (top / "python" / "sglang").is_dir():
        raise ToolError(f"{where} is inside the git repository {top}, which is not an SGLang checkout "
                        "(no python/sglang/ at its top); pass --sglang PATH to your SGLang clone")
    return repo


def git_refusal(top: Path, err: git.GitCommandError) -> str:
    """One line for a git command that failed where no other message fits, with git's own reason."""
    said = next((line.strip() for line in str(err.stderr or "").splitlines()
                 if line.strip() and line.strip() not in ("'", "stderr:")), "")
    said = said.removeprefix("stderr: ").strip("'")
    if "dubious ownership" in said:
        owner = top.stat().st_uid
        return (f"{top} belongs to another user (uid {owner}) and git refuses to work in it; sync a checkout of "
                f"your own, or, if you trust that user, `git config --global --add safe.directory {top}`")
    return f"git failed in {top} (exit {err.status}): {redact_urls(said) or 'no message'}"


def in_progress_operation(repo: git.Repo) -> str | None:
    """A merge/rebase/cherry-pick someone left half done: pulling on top of it would tangle it."""
    gitdir = Path(repo.git_dir)
    markers = {"MERGE_HEAD": "a merge", "rebase-merge": "a rebase", "rebase-apply": "a rebase or am",
               "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert", "BISECT_LOG": "a bisect"}
    for name, what in markers.items():
        if (gitdir / name).exists():
            return what
    return None


def dirty_paths(repo: git.Repo) -> list[str]:
    """Every path git status reports (modified, staged, untracked; both names of a rename)."""
    out = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all")
    paths: list[str] = []
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        paths.append(path)
        if "R" in code or "C" in code:  # -z puts the rename source in the next field
            if i < len(fields) and fields[i]:
                paths.append(fields[i])
            i += 1
    return sorted(set(paths))


def changed_paths(repo: git.Repo, old: str, new: str) -> list[str]:
    """Paths that differ between two commits (renames as delete + add: both names matter)."""
    out = repo.git.diff("--no-renames", "--name-only", "-z", old, new)
    return sorted(p for p in out.split("\0") if p)


def read_blob(repo: git.Repo, commit: str, path: str) -> str | None:
    """A file's text at a commit, or None when it does not exist there."""
    try:
        blob = repo.commit(commit).tree / path
    except KeyError:
        return None
    return blob.data_stream.read().decode("utf-8", errors="replace")


class CommitInfo(BaseModel):
    sha: str
    short: str
    subject: str = Field(description="First line of the message, as data (upstream text)")
    files: list[str] = Field(default_factory=list, description="Files changed (first-parent diff); capped")
    files_total: int = 0


def list_commits(repo: git.Repo, old: str, new: str, max_files: int = 40) -> list[CommitInfo]:
    """Commits in old..new, newest first, with their files, in one git call."""
    out = repo.git.log("--no-renames", "--name-only", "-z", "--diff-merges=first-parent",
                       "--format=%x1e%H%x1f%h%x1f%s", f"{old}..{new}")
    commits: list[CommitInfo] = []
    for record in out.split("\x1e"):
        if not record.strip("\0\n"):
            continue
        header, _, rest = record.partition("\0")
        sha, short, subject = (header.split("\x1f") + ["", ""])[:3]
        files = [f for f in rest.lstrip("\n").split("\0") if f.strip("\n")]
        files = [f.lstrip("\n") for f in files]
        commits.append(CommitInfo(sha=sha, short=short, subject=subject, files=files[:max_files],
                                  files_total=len(files)))
    return commits


@dataclass(frozen=True)
class GitRun:
    returncode: int
    output: str
    timed_out: bool


def run_git(repo_dir: str, args: list[str], timeout_s: float) -> GitRun:
    """Run git in its own process group so a hung network helper can be stopped with it.

    (gitpython's kill_after_timeout finds children with ``ps``, which minimal images lack.)
    """
    env = child_env(GIT_ENV)
    proc = subprocess.Popen(["git", "-C", repo_dir, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return GitRun(proc.returncode, out, False)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the group we just created: git and its remote helper only
        out, _ = proc.communicate()
        return GitRun(-9, out or "", True)
