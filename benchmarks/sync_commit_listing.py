"""Listing new commits with their files: one ``git log`` call (tools.sync.repo.list_commits)
versus gitpython's per-commit ``commit.stats`` (one ``git diff`` per commit), the obvious way.

SGLang merges dozens of commits a day, so a sync after a few weeks lists hundreds. Both ways run
on the same real repository in this process, in the same rounds. Goal: ours <= 0.1 of the reference.

    .venv/bin/python benchmarks/sync_commit_listing.py [--commits 300] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from tools.sync.gitpython import git  # noqa: E402
from tools.sync.repo import list_commits  # noqa: E402

GOAL = 0.1  # at least ten times faster than the obvious way
ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@example.invalid", "PATH": "/usr/bin:/bin"}


def make_repo(root: Path, commits: int) -> tuple[str, str]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=ENV)
    # fast-import writes all commits in one process: building the corpus is not what we measure.
    stream = []
    for i in range(commits + 1):
        files = "".join(f"M 644 inline python/sglang/srt/mod{(i + k) % 50}.py\ndata {len(str(i)) + 1}\n{i}\n"
                        for k in range(3))
        msg = f"commit {i}"
        stream.append(f"commit refs/heads/main\nmark :{i + 1}\ncommitter b <b@example.invalid> {1700000000 + i} +0000\n"
                      f"data {len(msg)}\n{msg}\n" + (f"from :{i}\n" if i else "") + files + "\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream), text=True, check=True, env=ENV)
    repo = git.Repo(root)
    new = repo.commit("main").hexsha
    old = repo.commit(f"main~{commits}").hexsha
    repo.close()
    return old, new


def per_commit_stats(repo: git.Repo, old: str, new: str) -> list[tuple[str, list[str]]]:
    return [(c.hexsha, sorted(c.stats.files)) for c in repo.iter_commits(f"{old}..{new}")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old, new = make_repo(Path(tmp), opts.commits)
        repo = git.Repo(tmp)
        one_call, reference = [], []
        for _ in range(opts.repeat):
            t = time.perf_counter()
            ours = list_commits(repo, old, new)
            one_call.append(time.perf_counter() - t)
            t = time.perf_counter()
            theirs = per_commit_stats(repo, old, new)
            reference.append(time.perf_counter() - t)
        assert [(c.sha, sorted(c.files)) for c in ours] == theirs, "the two ways disagree"
        repo.close()
    ref = f"gitpython commit.stats {statistics.median(reference) * 1000:.0f} ms"
    return finish([
        row("sync_commit_listing", f"list {opts.commits} commits with their files", one_call, "ms", ref, scale=1000),
        row("sync_commit_listing", "  ÷ gitpython per-commit stats", [a / b for a, b in zip(one_call, reference,
                                                                                          strict=True)],
            "x", ref, f"<= {GOAL}", GOAL),
    ])


if __name__ == "__main__":
    sys.exit(main())
