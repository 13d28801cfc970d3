"""Fast-forward-only pull against real git repositories (bare upstream + clones)."""
from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tests.sync_gitrepos import Upstream, git, snapshot, write
from tools.base import ToolError
from tools.sync.pull import pull
from tools.sync.repo import open_checkout


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path)


@pytest.fixture
def clone(upstream: Upstream, tmp_path: Path) -> Path:
    return upstream.clone(tmp_path / "sglang")


def refused(path: Path, match: str, **kwargs) -> str:
    before = snapshot(path)
    with pytest.raises(ToolError, match=match) as err:
        pull(open_checkout(path), **kwargs)
    assert snapshot(path) == before, "a refusal must leave the checkout exactly as it was"
    return str(err.value)


def test_fast_forward_lists_commits_and_files(upstream: Upstream, clone: Path):
    old = git(clone, "rev-parse", "HEAD")
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    new = upstream.commit({"python/sglang/srt/b.py": "y = 2\n", "README.md": None}, "Add b, drop readme")

    result = pull(open_checkout(clone))

    assert result.status == "fast_forwarded"
    assert (result.old_head, result.new_head) == (old, new)
    assert git(clone, "rev-parse", "HEAD") == new
    assert [c.subject for c in result.commits] == ["Add b, drop readme", "Add a"]
    assert result.commits[0].files == ["README.md", "python/sglang/srt/b.py"]
    assert result.changed_files == ["README.md", "python/sglang/srt/a.py", "python/sglang/srt/b.py"]
    assert "Fast-forward" in git(clone, "reflog", "-1", "--format=%gs")


def test_up_to_date_changes_nothing(clone: Path):
    before = snapshot(clone)
    result = pull(open_checkout(clone))
    assert result.status == "up_to_date" and result.commits == []
    assert snapshot(clone) == before


def test_local_commits_only_is_ahead_not_an_error(clone: Path):
    write(clone, "local.txt", "mine\n")
    git(clone, "add", "local.txt")
    git(clone, "commit", "-q", "-m", "local work")
    result = pull(open_checkout(clone))
    assert (result.status, result.ahead_by) == ("ahead", 1)


def test_dirty_tree_is_refused_without_allow_dirty(upstream: Upstream, clone: Path):
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    write(clone, "README.md", "my notes\n")
    write(clone, "scratch/untracked.txt", "wip\n")
    message = refused(clone, "--allow-dirty")
    assert "2 local change(s)" in message and "README.md" in message


def test_allow_dirty_pulls_when_incoming_does_not_touch_dirty_files(upstream: Upstream, clone: Path):
    new = upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    write(clone, "README.md", "my notes\n")
    result = pull(open_checkout(clone), allow_dirty=True)
    assert result.status == "fast_forwarded" and git(clone, "rev-parse", "HEAD") == new
    assert result.dirty_kept == ["README.md"]
    assert (clone / "README.md").read_text() == "my notes\n"  # the local change survived untouched
    assert git(clone, "stash", "list") == ""


def test_allow_dirty_refuses_when_incoming_touches_dirty_files(upstream: Upstream, clone: Path):
    upstream.commit({"README.md": "upstream text\n"}, "Edit readme")
    write(clone, "README.md", "my notes\n")
    message = refused(clone, "incoming commits change 1 file", allow_dirty=True)
    assert "README.md" in message


def test_allow_dirty_refuses_untracked_file_the_upstream_adds(upstream: Upstream, clone: Path):
    upstream.commit({"python/sglang/new.py": "upstream\n"}, "Add new.py")
    write(clone, "python/sglang/new.py", "my own\n")
    refused(clone, "python/sglang/new.py", allow_dirty=True)


def test_diverged_branch_is_refused(upstream: Upstream, clone: Path):
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Upstream work")
    write(clone, "local.txt", "mine\n")
    git(clone, "add", "local.txt")
    git(clone, "commit", "-q", "-m", "local work")
    message = refused(clone, "diverged")
    assert "1 local commit(s), 1 upstream" in message and "rebase" in message


def test_no_upstream_is_refused(clone: Path):
    git(clone, "checkout", "-q", "-b", "feature", "--no-track")
    message = refused(clone, "no upstream configured")
    assert "--set-upstream-to=origin/main feature" in message


def test_other_upstream_is_refused_with_the_flags_to_pass(upstream: Upstream, clone: Path):
    git(upstream.writer, "push", "-q", "origin", "main:dev")
    git(clone, "fetch", "-q", "origin")
    git(clone, "checkout", "-q", "-b", "dev", "--track", "origin/dev")
    refused(clone, "--branch dev")


def test_detached_head_is_refused(upstream: Upstream, clone: Path):
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    git(clone, "checkout", "-q", "--detach", "HEAD")
    refused(clone, "detached")


def test_unknown_remote_is_refused(clone: Path):
    refused(clone, "no remote named 'upstream'", remote="upstream")


def test_half_done_merge_is_refused(upstream: Upstream, clone: Path):
    (Path(git(clone, "rev-parse", "--absolute-git-dir")) / "MERGE_HEAD").write_text(
        git(clone, "rev-parse", "HEAD") + "\n")
    refused(clone, "a merge is in progress")


def test_shallow_clone_fast_forwards(upstream: Upstream, tmp_path: Path):
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    shallow = upstream.clone(tmp_path / "shallow", depth=1)
    new = upstream.commit({"python/sglang/srt/b.py": "y = 2\n"}, "Add b")
    result = pull(open_checkout(shallow))
    assert result.shallow and result.status == "fast_forwarded"
    assert git(shallow, "rev-parse", "HEAD") == new
    assert [c.subject for c in result.commits] == ["Add b"]


def test_not_a_git_repository(tmp_path: Path):
    plain = tmp_path / "plain"
    (plain / "python" / "sglang").mkdir(parents=True)
    with pytest.raises(ToolError, match="not inside a git repository.*--sglang"):
        open_checkout(plain)
    assert sorted(p.name for p in plain.rglob("*")) == ["python", "sglang"]  # nothing created


def test_repository_that_is_not_sglang_is_refused(tmp_path: Path):
    other = tmp_path / "project"
    other.mkdir()
    git(other, "init", "-q")
    package = other / ".venv" / "lib" / "sglang"
    package.mkdir(parents=True)
    with pytest.raises(ToolError, match="not an SGLang checkout"):
        open_checkout(package)


def test_remote_that_refuses_connections_leaves_checkout_unchanged(clone: Path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    git(clone, "remote", "set-url", "origin", f"http://127.0.0.1:{port}/sglang.git")
    refs = git(clone, "for-each-ref")
    message = refused(clone, "fetch from origin .* failed")
    assert "Nothing was changed" in message and git(clone, "for-each-ref") == refs


def test_remote_path_that_does_not_exist(clone: Path, tmp_path: Path):
    git(clone, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    refused(clone, "fetch from origin .* failed")


def test_remote_that_never_answers_times_out(clone: Path):
    """A loopback socket that accepts and then stays silent: the network-down case."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        git(clone, "remote", "set-url", "origin", f"http://127.0.0.1:{server.getsockname()[1]}/sglang.git")
        refused(clone, "did not finish within 2 s", fetch_timeout_s=2)
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def test_credentials_in_the_remote_url_never_reach_the_message(clone: Path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    git(clone, "remote", "set-url", "origin", f"http://bot:ghp_SECRET123@127.0.0.1:{port}/sglang.git")
    message = refused(clone, "fetch from origin .* failed")
    assert "ghp_SECRET123" not in message and "***@127.0.0.1" in message


def test_shallow_clone_with_local_commits_is_still_refused_as_diverged(upstream: Upstream, tmp_path: Path):
    shallow = upstream.clone(tmp_path / "shallow", depth=1)
    upstream.commit({"python/sglang/srt/b.py": "y = 2\n"}, "Upstream b")
    write(shallow, "local.txt", "mine\n")
    git(shallow, "add", "local.txt")
    git(shallow, "commit", "-q", "-m", "local work")
    refused(shallow, "diverged")


def test_a_fast_forward_that_would_replace_an_ignored_file_is_refused(upstream: Upstream, clone: Path):
    upstream.commit({"python/sglang/srt/local_settings.py": "upstream = True\n"}, "Add settings module")
    exclude = Path(git(clone, "rev-parse", "--absolute-git-dir")) / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("python/sglang/srt/local_settings.py\n")  # the user's own, ignored locally
    write(clone, "python/sglang/srt/local_settings.py", "token = 'mine'\n")
    for allow_dirty in (False, True):
        message = refused(clone, "local_settings.py", allow_dirty=allow_dirty)
        assert "ignored" in message and "Nothing was changed" in message
    assert (clone / "python/sglang/srt/local_settings.py").read_text() == "token = 'mine'\n"


def test_an_ignored_folder_where_upstream_adds_a_file_is_refused(upstream: Upstream, clone: Path):
    upstream.commit({"build/out.txt": "upstream\n"}, "Add build/out.txt")
    (Path(git(clone, "rev-parse", "--absolute-git-dir")) / "info" / "exclude").write_text("build/\n")
    write(clone, "build/out.txt", "my build output\n")
    refused(clone, "build/out.txt", allow_dirty=True)


def test_a_refusal_after_fetching_moves_no_remote_ref_and_no_fetch_head(upstream: Upstream, clone: Path):
    before_remote = git(clone, "rev-parse", "refs/remotes/origin/main")
    upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Upstream work")
    write(clone, "local.txt", "mine\n")
    git(clone, "add", "local.txt")
    git(clone, "commit", "-q", "-m", "local work")
    refused(clone, "diverged")  # the snapshot covers every ref and FETCH_HEAD
    assert git(clone, "rev-parse", "refs/remotes/origin/main") == before_remote


def test_a_fast_forward_updates_the_remote_tracking_ref_and_leaves_no_private_ref(upstream: Upstream, clone: Path):
    new = upstream.commit({"python/sglang/srt/a.py": "x = 1\n"}, "Add a")
    assert pull(open_checkout(clone)).status == "fast_forwarded"
    assert git(clone, "rev-parse", "refs/remotes/origin/main") == new
    assert git(clone, "for-each-ref", "refs/dsv4-agent") == ""
    assert "behind" not in git(clone, "status", "-sb")
