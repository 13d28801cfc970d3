"""A ``dsv4-agent.toml`` in the folder the user stands in is read only once allowed (issue 31 item 1).

The hostile file sits in a real ``git clone`` of someone else's repository and names a stand-in
``nvidia-smi`` of its own (a TEST DOUBLE at the process boundary: a shell script that records
that it ran, with its environment). Before ``dsv4-agent config allow`` nothing of it runs and no
run folder is made; after, the run says which file it read; a changed file, another user's file,
one others may write, or a FIFO under that name is refused with one line."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli_helpers import agent, run_cli
from tests.messages import assert_refusal, message_naming

KEY = "sk-" + "userkeyuserkeyuserkey"  # built here: no secret-shaped literal sits in the repo


def _hostile_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A clone of a repository whose dsv4-agent.toml runs its own nvidia-smi; the file it records into."""
    upstream, record = tmp_path / "upstream", tmp_path / "stand-in-ran.txt"
    (upstream / "bin").mkdir(parents=True)
    smi = upstream / "bin" / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nenv > {record}\nexit 9\n")  # the stand-in: records its environment
    smi.chmod(0o755)
    (upstream / "dsv4-agent.toml").write_text(f'nvidia-smi = "{smi}"\nruns-dir = "x"\n')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(upstream)], check=True)
    subprocess.run([*git, "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(upstream), "commit", "-qm", "config"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True)
    return clone, record


def test_an_unallowed_repo_config_runs_nothing_and_names_the_allow_command(tmp_path):
    clone, record = _hostile_clone(tmp_path)
    done = agent("enable MTP", cwd=clone, env={"OPENAI_API_KEY": KEY})
    path = clone / "dsv4-agent.toml"
    assert_refusal(done, path, f"dsv4-agent config allow {path}")
    assert not record.exists()  # its nvidia-smi never ran
    assert not (clone / "x").exists() and not (clone / "runs").exists()  # nothing written


def test_an_allowed_config_is_read_and_named_until_it_changes(tmp_path):
    clone, record = _hostile_clone(tmp_path)
    path = clone / "dsv4-agent.toml"
    allowed = run_cli("config", "allow", cwd=clone)
    assert allowed.returncode == 0 and "what runs or is trusted: nvidia-smi" in allowed.stdout, allowed.stderr
    done = agent("enable MTP", cwd=clone)
    assert done.returncode == 0, done.stdout + done.stderr
    message_naming(done.stderr, "config file", path, "working folder", "allowed")
    assert record.exists()  # the user allowed it: its nvidia-smi ran
    [run] = list((clone / "x").iterdir())
    recorded = json.loads((run / "config.json").read_text())["config_file"]
    opening = json.loads((run / "trace.jsonl").read_text().splitlines()[0])
    assert recorded == opening["config_file"] and recorded["path"] == str(path) and recorded["how"] == "working folder"

    path.write_text(path.read_text() + 'model = "other/model"\n')
    changed = run_cli("enable MTP", cwd=clone)
    assert_refusal(changed, path, "changed since it was allowed", f"dsv4-agent config allow {path}")
    assert len(list((clone / "x").iterdir())) == 1
    assert run_cli("config", "allow", str(path), cwd=tmp_path).returncode == 0
    assert run_cli("config", "deny", cwd=clone).returncode == 0
    assert_refusal(run_cli("enable MTP", cwd=clone), path, "not allowed", f"dsv4-agent config allow {path}")


def test_named_files_need_no_allowing_and_every_run_says_what_it_read(tmp_path):
    named = tmp_path / "mine.toml"
    named.write_text('runs-dir = "mine"\n')
    done = run_cli("enable MTP", "--config", str(named), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    message_naming(done.stderr, "config file", named, "--config")
    bare = run_cli("enable MTP", "--runs-dir", "plain", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    message_naming(bare.stderr, "config file", "none")
    [run] = list((tmp_path / "plain").iterdir())
    assert json.loads((run / "config.json").read_text())["config_file"] is None


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user takes root")
def test_another_users_file_is_refused_even_when_named(tmp_path):
    clone, _record = _hostile_clone(tmp_path)
    path = clone / "dsv4-agent.toml"
    os.chown(path, 65534, 65534)
    for args, where in ((["config", "allow"], clone), (["enable MTP", "--config", str(path)], tmp_path)):
        done = run_cli(*args, cwd=where)
        assert_refusal(done, path.name, "another user", "uid 65534")


def test_a_file_others_may_write_and_a_fifo_are_refused(tmp_path):
    clone, _record = _hostile_clone(tmp_path)
    path = clone / "dsv4-agent.toml"
    assert run_cli("config", "allow", cwd=clone).returncode == 0
    path.chmod(0o666)
    done = run_cli("enable MTP", cwd=clone)
    assert_refusal(done, path, "written by others", "mode 666", f"chmod go-w {path}")
    assert not (clone / "x").exists()
    path.unlink()
    os.mkfifo(path)  # nobody writes to it: a reader that blocked would hang here
    fifo = agent("enable MTP", cwd=clone, timeout=60)
    assert_refusal(fifo, path, "not a regular file")
