"""The conventions people expect of a command line: --version, -h, grouped help with real metavars,
typo suggestions, one error form with exit 2 for usage errors, --json validated against the
documented schema, runs listing and cleaning, jobs --stop all, completion, a closed pipe."""
from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from agent.commands.cli import app
from agent.commands.options import OPTIONS
from agent.settings.model import Settings
from tests.cli_helpers import AGENT, agent, clean_env, run_cli
from tests.messages import assert_refusal
from tests.slowdown import limit
from tools.jobs import JobSpec, LocalExecutor

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "cli-json.schema.json").read_text())
COMMANDS = ["run", "resume", "bundle", "status", "jobs", "runs", "report", "compare", "replay", "mtp", "sync",
            "tuning", "tuning plan", "tuning prove", "tuning shapes", "tuning uninstall"]


def cli(*args: str, cwd: Path | None = None):
    """The CLI in this process (nothing about a subprocess matters for these checks)."""
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        return CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)


def valid(data, name: str) -> None:
    jsonschema.validate(data, {**SCHEMA, "$ref": f"#/$defs/{name}"})


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory) -> Path:
    """A real planned campaign (no GPU here), made by the installed console script."""
    root = tmp_path_factory.mktemp("planned")
    done = run_cli("enable MTP", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # stdout is only the result; progress went to stderr
    valid(result, "result")
    assert result["status"] == "planned" and "[control]" in done.stderr
    return Path(root / result["run"])


def test_version_is_the_tools_own():
    done = agent("--version", cwd=Path.cwd())
    assert done.returncode == 0 and done.stdout.strip() == f"dsv4-agent {version('dsv4-agent')}"


@pytest.mark.parametrize("command", COMMANDS)
def test_short_help_equals_long_help_and_shows_real_metavars(command):
    short, long = cli(*command.split(), "-h"), cli(*command.split(), "--help")
    assert short.exit_code == 0 and short.stdout == long.stdout
    assert not re.search(r"<(str|int|float|bool|list|path|choice)\b[^>]*>", short.stdout), short.stdout
    assert "{" not in short.stdout.splitlines()[0]


def test_run_help_groups_its_options_into_panels():
    out = cli("run", "-h").stdout
    for panel in ("Model:", "SGLang:", "GPUs and where jobs run:", "Kernel tuning:", "Benchmark:", "LLM planning:",
                  "Run:"):
        assert f"\n{panel}\n" in out, panel
    assert "--model-path DIR" in out and "--gpus LIST" in out and "--config FILE" in out
    top = cli("--help").stdout
    assert "Campaigns:" in top and "Runs:" in top and "--version" in top and "--install-completion" in top


def test_every_setting_option_sets_a_real_setting():
    assert set(OPTIONS) <= set(Settings.model_fields)
    config_only = set(Settings.model_fields) - set(OPTIONS)
    assert config_only == {"llm_api_key"}  # the key never goes on a command line


def test_a_typo_gets_a_suggestion_and_starts_nothing(tmp_path):
    done = run_cli("stauts", "latest", cwd=tmp_path)
    assert_refusal(done, "'stauts'", "'status'")
    assert not (tmp_path / "runs").exists()
    assert_refusal(cli("jbos", "latest"), "'jbos'", "'jobs'")
    routed = cli("benchmark", "--frobnicate")  # a one-word goal still runs a campaign
    assert_refusal(routed, "--frobnicate", "dsv4-agent run -h")


def test_usage_errors_are_one_line_with_the_tools_prefix_and_exit_2(tmp_path):
    for args in (["status", "ghost"], ["tuning", "plan"], ["run"], ["jobs", "x", "--lines", "0"],
                 ["runs", "--runs-dir", str(tmp_path / "none")]):
        assert_refusal(cli(*args, cwd=tmp_path))


def test_cli_beats_environment_beats_config_file(tmp_path):
    (tmp_path / "dsv4-agent.toml").write_text('runs-dir = "from-file"\nexecutor = "carrier-pigeon"\n'
                                              'nvidia-smi = "file-smi"\n')
    allowed = run_cli("config", "allow", cwd=tmp_path)  # a working folder's file is read once allowed
    assert allowed.returncode == 0 and "what runs or is trusted: executor, nvidia-smi" in allowed.stdout, allowed.stdout + allowed.stderr
    env = {"DSV4_RUNS_DIR": "from-env", "DSV4_EXECUTOR": "local"}
    done = run_cli("enable MTP", "--runs-dir", "from-cli", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr  # the environment's executor beat the file's bad one
    recorded = json.loads(next((tmp_path / "from-cli").glob("*/config.json")).read_text())["settings"]
    assert recorded["runs_dir"] == "from-cli"      # command line > environment
    assert recorded["executor"] == "local"         # environment > file
    assert recorded["nvidia_smi"] == "file-smi"    # file > defaults
    assert not (tmp_path / "from-env").exists() and not (tmp_path / "from-file").exists()
    refused = run_cli("enable MTP", cwd=tmp_path, env={"DSV4_RUNS_DIR": "from-env"})
    assert_refusal(refused, "carrier-pigeon")  # the file's value, with no env above it


def test_config_option_reads_the_named_file_and_refuses_a_missing_one(tmp_path):
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text('runs-dir = "cfg-runs"\n')
    done = run_cli("enable MTP", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "cfg-runs").glob("*/result.json"))
    missing = run_cli("enable MTP", "--config", "nope.toml", cwd=tmp_path)
    assert_refusal(missing, "config file", "nope.toml", "does not exist")
    assert len(list((tmp_path / "cfg-runs").iterdir())) == 1  # the refused run made no folder


def test_status_json_is_full_and_valid(planned_run):
    done = cli("status", str(planned_run), "--json")
    assert done.exit_code == 0
    data = json.loads(done.stdout)
    valid(data, "status")
    recorded = {p.stem: json.loads(p.read_text())["summary"] for p in (planned_run / "steps").glob("*.json")}
    assert {s["kind"]: s["summary"] for s in data["steps"]} == recorded  # summaries in full
    text = cli("status", str(planned_run)).stdout
    for summary in recorded.values():  # the text view wraps, never cuts
        assert " ".join(summary.split()) in " ".join(text.split()), summary


def test_report_and_replay_json_are_valid(planned_run):
    report = cli("report", str(planned_run), "--json")
    assert report.exit_code == 0, report.stderr
    valid(json.loads(report.stdout), "report")
    replay = cli("replay", str(planned_run), "--json")
    data = json.loads(replay.stdout)
    valid(data, "replay")
    assert replay.exit_code == data["exit_code"] == 0 and data["replay"]["matched"] == data["replay"]["total"]


def _run_with_jobs(tmp_path: Path, name: str) -> tuple[Path, LocalExecutor]:
    run = tmp_path / "runs" / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    return run, LocalExecutor(run / "jobs")


def test_jobs_json_and_stop_all(tmp_path):
    run, executor = _run_with_jobs(tmp_path, "20260101T000000Z-jobs")
    executor.launch(JobSpec(key="quick", argv=[sys.executable, "-c", "print('hi')"], gpus=[]))
    for key in ("sleeper-a", "sleeper-b"):
        executor.launch(JobSpec(key=key, argv=[sys.executable, "-c", "import time; time.sleep(600)"], gpus=[0],
                                grace_s=2))
    deadline = time.monotonic() + limit(60)
    while executor.poll("quick").status != "succeeded" and time.monotonic() < deadline:
        time.sleep(0.05)
    listed = cli("jobs", str(run), "--json")
    valid(json.loads(listed.stdout), "jobs")
    assert {j["key"]: j["status"] for j in json.loads(listed.stdout)} == {
        "quick": "succeeded", "sleeper-a": "running", "sleeper-b": "running"}
    stopped = run_cli("jobs", str(run), "--stop", "all", "--json", cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    states = json.loads(stopped.stdout)
    valid(states, "jobs")
    assert sorted(s["key"] for s in states) == ["sleeper-a", "sleeper-b"]  # the finished job is left alone
    assert all(executor.poll(k).status == "stopped" for k in ("sleeper-a", "sleeper-b"))
    again = cli("jobs", str(run), "--stop", "all")
    assert again.exit_code == 0 and "no running jobs to stop" in again.stdout
    unknown = cli("jobs", str(run), "--stop", "ghost")
    assert_refusal(unknown, "job", "'ghost'")


def _old_run(tmp_path: Path, name: str, result: dict | None) -> Path:
    run = tmp_path / "runs" / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": name, "settings": {}}))
    if result is not None:
        (run / "result.json").write_text(json.dumps({"summary": "", "finished_at": 0.0, **result}))
    return run


def test_runs_lists_and_cleans_only_old_finished_unlocked_runs(tmp_path):
    finished = _old_run(tmp_path, "20200101T000000Z-finished", {"status": "finished"})
    unfinished = _old_run(tmp_path, "20200101T000001Z-crashed", None)
    driven = _old_run(tmp_path, "20200101T000002Z-driven", {"status": "planned"})
    fresh = _old_run(tmp_path, "20990101T000000Z-fresh", {"status": "finished", "finished_at": time.time()})
    listed = cli("runs", "--json", cwd=tmp_path)
    valid(json.loads(listed.stdout), "runs")
    with open(driven / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242")
        held.flush()
        assert {e["name"]: e["status"] for e in json.loads(cli("runs", "--json", cwd=tmp_path).stdout)}[
            driven.name] == "planned"
        dry = cli("runs", "--clean", "--older-than", "7d", "--dry-run", "--json", cwd=tmp_path)
        valid(json.loads(dry.stdout), "runs_clean")
        assert finished.exists()
        done = cli("runs", "--clean", "--older-than", "7d", "--json", cwd=tmp_path)
    data = json.loads(done.stdout)
    valid(data, "runs_clean")
    assert [e["name"] for e in data["removed"]] == [finished.name] and not finished.exists()
    kept = {k["name"]: k["why"] for k in data["kept"]}
    assert "unfinished" in kept[unfinished.name] and "pid 4242" in kept[driven.name]
    assert unfinished.exists() and driven.exists() and fresh.exists()
    text = cli("runs", "--clean", "--older-than", "7d", cwd=tmp_path).stdout
    assert f"kept {unfinished.name}: unfinished" in text
    bad = cli("runs", "--clean", "--older-than", "a week", cwd=tmp_path)
    assert_refusal(bad, "--older-than", "'a week'")


def test_completion_is_switched_on():
    env = clean_env({"_DSV4_AGENT_COMPLETE": "complete_bash", "COMP_WORDS": "dsv4-agent sta", "COMP_CWORD": "1"})
    done = subprocess.run([AGENT], env=env, capture_output=True, text=True, timeout=limit(60))
    assert done.returncode == 0 and "status" in done.stdout.split()


def test_a_closed_pipe_ends_quietly(planned_run):
    head = subprocess.run(f"{AGENT} status {planned_run} | head -n 1", shell=True, capture_output=True, text=True,
                          env=clean_env(), timeout=limit(60))
    assert head.stdout.startswith("run:") and "Traceback" not in head.stderr and "Broken pipe" not in head.stderr


def test_tuning_json_is_the_tools_result_model():
    from tools.tuning.plan import TuningPlan
    from tools.tuning.shapes import FindShapesResult

    plan = cli("tuning", "plan", "--shapes", "4096,7168", "--gpu-count", "2", "--json")
    assert plan.exit_code == 0 and TuningPlan.model_validate_json(plan.stdout).total_units == 18
    shapes = cli("tuning", "shapes", "--shapes", "4096,7168", "--json")
    assert shapes.exit_code == 0 and [(s.n, s.k) for s in FindShapesResult.model_validate_json(shapes.stdout).shapes] \
        == [(4096, 7168)]
