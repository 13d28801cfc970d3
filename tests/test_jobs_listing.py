"""The job listing reads a local ledger without the pydantic models (tools/jobs/ledger/listing.py):
on ledgers written by real jobs it answers what LocalExecutor's JobStates say, field for field, and
``dsv4-agent jobs RUN`` prints what the whole command line prints, with no model imported."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import AGENT, clean_env
from tests.messages import assert_refusal
from tests.slowdown import limit, wait_for
from tools.jobs import JobSpec, JobState, LocalExecutor
from tools.jobs.ledger.files import write_json
from tools.jobs.ledger.listing import local_jobs

GOLDEN = Path(__file__).parent / "golden" / "playbook-mtp-tune"
WHOLE = [sys.executable, "-c", "import sys; from agent.commands.main import main; sys.argv[0] = 'dsv4-agent'; main()"]


def _ended(ex: LocalExecutor, key: str) -> JobState:
    return wait_for(lambda: (s := ex.poll(key)).done and s, 30, f"job {key} to end")


@pytest.fixture
def ledger(tmp_path: Path):
    """A run folder whose ledger holds jobs that succeeded, failed, timed out, were stopped, one that
    runs, and an intent no process was ever started for."""
    run = tmp_path / "runs" / "golden"
    shutil.copytree(GOLDEN, run)
    root = run / "jobs"
    ex = LocalExecutor(root)
    ex.launch(JobSpec(key="ok", argv=[sys.executable, "-c", "pass"], kind="bench", gpus=[0, 1]))
    ex.launch(JobSpec(key="bad", argv=[sys.executable, "-c", "import sys; sys.exit(3)"], kind="tune", lane="research"))
    ex.launch(JobSpec(key="slow", argv=["sleep", "600"], timeout_s=0.2, grace_s=0.1))
    ex.launch(JobSpec(key="halted", argv=["sleep", "600"], grace_s=0.1))
    ex.launch(JobSpec(key="serving", argv=["sleep", "600"], kind="serve", gpus=[]))
    for key in ("ok", "bad", "slow"):
        _ended(ex, key)
    ex.stop("halted")
    (root / "never").mkdir()
    write_json(root / "never" / "job.json", {"key": "never", "argv": ["true"], "intent_at": time.time() - 3600})
    yield tmp_path, root, ex
    ex.stop("serving")


def test_the_listing_is_the_executors_job_states(ledger):
    _work, root, _ex = ledger
    listed = local_jobs(root)
    states = LocalExecutor(root).jobs()
    assert [r["status"] for r in listed] == ["failed", "stopped", "lost", "succeeded", "running",
                                             "timed_out"]
    assert listed == [s.model_dump(mode="json") for s in states]
    for record in listed:
        assert list(record) == list(JobState.model_fields)  # the model is the one definition of a job's fields
        assert JobState.model_validate(record).model_dump(mode="json") == record


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_jobs_prints_what_the_whole_command_line_prints_without_the_models(ledger, tmp_path, as_json):
    work, root, ex = ledger
    ex.stop("serving")  # a running job's elapsed time goes on between the two processes
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "100"})
    argv = ["jobs", "golden", *(["--json"] if as_json else [])]
    run = [subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=limit(60))
           for cmd in ([AGENT, *argv], [*WHOLE, *argv])]
    assert [(d.returncode, d.stdout, d.stderr) for d in run][0] == [(d.returncode, d.stdout, d.stderr) for d in run][1]
    assert run[0].returncode == 0 and "timed_out" in run[0].stdout, run[0].stderr
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('typer', 'pydantic', 'langgraph', 'openai', 'rich'))), file=sys.stderr))\n"
             f"sys.argv = ['dsv4-agent', *{argv!r}]\nfrom agent.commands.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=work, env=env, capture_output=True, text=True,
                          timeout=limit(60))
    assert done.stdout == run[0].stdout
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("executor", [None, 7, ["local"]], ids=repr)
def test_a_run_folder_naming_no_executor_is_one_line_and_exit_2(tmp_path, executor):
    run = tmp_path / "runs" / "golden"
    shutil.copytree(GOLDEN, run)
    config = json.loads((run / "config.json").read_text())
    config["settings"]["executor"] = executor
    (run / "config.json").write_text(json.dumps(config))
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache")})
    for cmd in ([AGENT, "jobs", "golden"], [*WHOLE, "jobs", "golden"]):
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=limit(60))
        assert_refusal(done, "unknown", "executor", quiet=True)
