"""Bad input at the edges ends in one line (issue 31 item 9): counts past any sane range are refused
before a run exists, a checkout owned by another user is refused by sync in git's words and ours,
and JSON nested 200,000 deep in a run folder is named, not a RecursionError. Through the CLI (in
this process where a new interpreter adds nothing; the console script where its fast path answers)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.exit_codes import ExitCode
from tests.cli_helpers import agent, only_run, run_cli

BIG = "9" * 25  # past 64 bits


def _one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv4-agent: ") and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("option", ["--input-len", "--output-len", "--prompts-per-concurrency", "--min-prompts",
                                    "--repeats", "--gpus", "--tp", "--concurrency", "--mtp-variants",
                                    "--accuracy-questions", "--max-llm-steps", "--llm-max-tokens"])
def test_counts_past_their_range_are_refused_before_a_run_exists(tmp_path, option):
    done = run_cli("benchmark", option, BIG, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = _one_line(done)
    assert option in line and BIG in line, line
    assert not (tmp_path / "runs").exists()


def test_repeats_just_past_the_limit_names_it(tmp_path):
    line = _one_line(run_cli("benchmark", "--repeats", "101", cwd=tmp_path))
    assert line == "dsv4-agent: --repeats takes at most 100 (got 101)"


@pytest.mark.parametrize("args", [["tuning", "plan", "--shapes", "4096,7168", "--gpu-count", BIG],
                                  ["tuning", "plan", "--shapes", "4096,7168", "--gpu-count", "100000000"],
                                  ["tuning", "plan", "--shapes", "4096,7168", "--batch-size", BIG],
                                  ["tuning", "shapes", "--shapes", "4096,7168", "--tp", BIG],
                                  ["mtp", "--model", "x", "--gpu-count", BIG]])
def test_tool_commands_refuse_counts_past_their_range(tmp_path, args):
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert args[-2] in _one_line(done)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a checkout to another user takes root")
def test_sync_on_another_users_checkout_is_one_line(tmp_path):
    upstream, clone = tmp_path / "upstream", tmp_path / "clone"
    (upstream / "python" / "sglang").mkdir(parents=True)
    (upstream / "python" / "sglang" / "__init__.py").write_text("")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(upstream)], check=True)
    subprocess.run([*git, "-C", str(upstream), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(upstream), "commit", "-qm", "x"], check=True)
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True)
    for path in [clone, *clone.rglob("*")]:
        os.lchown(path, 65534, 65534)
    done = agent("sync", "--sglang", str(clone), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    line = _one_line(done)
    assert f"{clone} belongs to another user (uid 65534)" in line and "safe.directory" in line, line


DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deep")
    done = run_cli("enable MTP", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return only_run(root)


@pytest.mark.parametrize("relative", ["config.json", "plan.json", "steps/infer_mtp.json", "trace.jsonl"])
def test_json_nested_200000_deep_in_a_run_folder_is_one_line(tmp_path, finished_run, relative):
    run = tmp_path / finished_run.name
    shutil.copytree(finished_run, run)
    target = run / relative
    if relative.endswith(".jsonl"):
        lines = target.read_text().splitlines()
        target.write_text("\n".join([lines[0], DEEP, *lines[1:]]) + "\n")
    else:
        target.write_text(DEEP)
    said = {}
    for args in (["status", str(run)], ["report", str(run)], ["replay", str(run)]):
        done = agent(*args, cwd=tmp_path) if args[0] == "status" else run_cli(*args, cwd=tmp_path)
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, (args, done.stderr[-500:])
        assert done.returncode in (0, 1, 2, ExitCode.CUT_SHORT), (args, done.returncode, done.stderr)
        said[args[0]] = (done.returncode, done.stdout + done.stderr)
    assert said["replay"][0] != 0, said["replay"]  # a run it cannot read whole is never "reproduced"
    if relative == "trace.jsonl":  # status shows the damage and where replay stops reading
        assert "corrupt" in said["status"][1], said["status"]
    else:  # the file is named, in one line
        assert said["status"][0] == 2 and f"{target} is nested too deeply" in said["status"][1], said["status"]
