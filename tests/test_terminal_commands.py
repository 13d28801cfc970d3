"""What the commands print for a person at a terminal: the top-level help with every command's
description whole and an example under each command's -h (each one parsed by the command line);
-V; shell completion of run ids and 'latest'; `runs` under a header row; `jobs` in the order the
jobs were launched; `status` with the verdict and the report's path."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent.commands.examples import EXAMPLES
from tests.cli_helpers import AGENT, clean_env, run_cli
from tests.slowdown import limit, wait_for


def _commands():
    """(path after the tool's name, click command) of every command and group."""
    import typer

    from agent.commands.cli import app

    found = []

    def walk(command, path: str) -> None:
        found.append((path, command))
        ctx = command.context_class(command)  # a group lists and builds its commands on demand (agent/commands/main.py)
        for name in command.list_commands(ctx) if hasattr(command, "list_commands") else []:
            walk(command.get_command(ctx, name), f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def test_every_command_has_an_example_that_parses():
    import click

    commands = dict(_commands())
    assert set(commands) == set(EXAMPLES)  # one entry per command: none missing, none stale
    for path, lines in EXAMPLES.items():
        shown = run_cli(*path.split(), "-h", cwd=Path.cwd())
        assert shown.returncode == 0 and "Examples:" in shown.stdout, path
        for line in lines:
            assert f"  {line}\n" in shown.stdout, line
            words = shlex.split(line)[1:]
            command, args = commands[""], words
            if path == "run" and words[0] != "run":  # the goal-first form: dsv4-agent "GOAL" ...
                command, args = commands[path], words
            elif path:
                command, args = commands[path], words[len(path.split()):]
                assert words[:len(path.split())] == path.split(), line
            elif words and not words[0].startswith("-") and words[0] in commands:
                continue  # the tool's own examples name other commands, parsed under their own paths
            try:  # parsed as the command line would, nothing run
                command.make_context(f"dsv4-agent {path}".strip(), list(args))
            except click.exceptions.Exit:
                pass


def test_the_top_level_help_gives_each_description_whole():
    lines = run_cli("-h", cwd=Path.cwd()).stdout.splitlines()
    shown = " ".join(" ".join(line for line in lines if not line.startswith("Usage:")).split())
    for path, command in _commands():
        if path and " " not in path:
            first = " ".join((command.help or "").split("\n\n")[0].split())
            sentence = first.split(". ")[0].rstrip(".")
            assert f"{path} {sentence}" in shown, path
    assert "..." not in shown and "…" not in shown


def test_dash_v_is_the_version():
    long, short = (subprocess.run([AGENT, flag], capture_output=True, text=True, timeout=limit(60), env=clean_env())
                   for flag in ("--version", "-V"))
    assert short.returncode == 0 and short.stdout == long.stdout and short.stdout.startswith("dsv4-agent ")
    assert run_cli("-V", cwd=Path.cwd()).stdout == long.stdout  # the whole command line says the same


def _complete(words: str, cwd: Path) -> list[str]:
    env = clean_env({"_DSV4_AGENT_COMPLETE": "complete_bash", "COMP_WORDS": words,
                     "COMP_CWORD": str(len(words.split(" ")) - 1)})
    done = subprocess.run([AGENT], cwd=cwd, env=env, capture_output=True, text=True, timeout=limit(60))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_completion_offers_latest_and_the_run_ids(tmp_path):
    for name in ("20261201T090000Z-enable-mtp", "20261202T090000Z-tune-kernels"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    (tmp_path / "elsewhere" / "20261203T090000Z-other").mkdir(parents=True)
    assert _complete("dsv4-agent status ", tmp_path) == ["latest", "20261202T090000Z-tune-kernels",
                                                         "20261201T090000Z-enable-mtp"]
    assert _complete("dsv4-agent jobs 20261201", tmp_path) == ["20261201T090000Z-enable-mtp"]
    assert _complete("dsv4-agent resume la", tmp_path) == ["latest"]
    assert _complete("dsv4-agent tuning prove --runs-dir elsewhere 2026", tmp_path) == ["20261203T090000Z-other"]


def test_runs_has_a_header_row_and_jobs_are_in_launch_order(tmp_path):
    from tools.jobs import JobSpec
    from tools.jobs.local import LocalExecutor

    run = tmp_path / "runs" / "20260101T000000Z-tune-kernels"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    executor = LocalExecutor(run / "jobs")
    for key in ("zeta-first", "alpha-second"):  # launched in this order; by name it would be the other
        executor.launch(JobSpec(key=key, argv=[sys.executable, "-c", "pass"], gpus=[]))
        wait_for(lambda key=key: executor.poll(key).done, 60, f"job {key} to end")
    for answer in (run_cli("jobs", "latest", cwd=tmp_path),
                   subprocess.run([AGENT, "jobs", "latest"], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=limit(60), env=clean_env())):
        lines = answer.stdout.splitlines()
        assert lines[0].split()[:5] == ["job", "kind", "status", "gpus", "started"], answer.stdout
        assert [line.split()[0] for line in lines[2:]] == ["zeta-first", "alpha-second"]
        assert all(line.split()[3] == "-" for line in lines[2:])  # no GPU: '-', as the live view shows it
    listed = json.loads(run_cli("jobs", "latest", "--json", cwd=tmp_path).stdout)
    assert [j["key"] for j in listed] == ["zeta-first", "alpha-second"]
    runs = subprocess.run([AGENT, "runs"], cwd=tmp_path, capture_output=True, text=True, timeout=limit(60),
                          env=clean_env()).stdout.splitlines()
    assert runs[0].split() == ["run", "status", "goal"] and set(runs[1]) <= {"-", " "}
    assert runs[2].split()[:2] == ["20260101T000000Z-tune-kernels", "unfinished"]


@pytest.mark.parametrize("recommended", ["mtp", None])
def test_status_shows_the_verdict_and_the_report(tmp_path, recommended):
    run = tmp_path / "runs" / "20260101T000000Z-enable-mtp"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": {}}))
    verdict = {"recommended": recommended, "reason": "mtp has the lowest TPOT measurably at 2 of 2 levels"}
    (run / "result.json").write_text(json.dumps({"status": "finished", "summary": "benchmark: done", "finished_at": 0,
                                                 "verdict": verdict, "report": str(run / "report.html")}))
    shown = subprocess.run([AGENT, "status", "latest"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=limit(60), env=clean_env()).stdout.splitlines()
    decision = "deploy mtp" if recommended else "no recommendation"
    assert f"verdict: {decision}: mtp has the lowest TPOT measurably at 2 of 2 levels" in shown
    assert f"report: {run / 'report.html'}" in shown
