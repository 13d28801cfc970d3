"""The hand-off gate (docs/workflow.md, 2b): a bundle resumed on a host whose SGLang tree gives other
flags, variants or evidence stops before any GPU job, shows the diff, and goes on only when accepted."""
from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli, wait_for
from tests.doubles.tokenizer import build_tokenizer
from tests.messages import assert_refusal

LAPTOP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # no nvidia-smi: the run is planned


def _bundle(tmp_path: Path, wheel_root: Path) -> Path:
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    planned = run_cli(*campaign_args(laptop, wheel_root, goal="enable MTP"), cwd=laptop, env=LAPTOP_ENV)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr
    made = run_cli("bundle", "latest", "-o", str(tmp_path) + "/", "--json", cwd=laptop)
    assert made.returncode == 0, made.stderr
    return Path(json.loads(made.stdout)["bundle"])


def test_a_bundle_whose_evidence_changes_on_the_host_stops_with_the_diff_until_accepted(
        tmp_path, sglang_wheel_root, corpus_checkouts):
    archive = _bundle(tmp_path, sglang_wheel_root)
    host = tmp_path / "gpu-host"
    host.mkdir()
    shutil.copy(archive, host / archive.name)
    tok = build_tokenizer(host / "tok")
    paths = ["--sglang", str(corpus_checkouts["old"]), "--sglang-python", str(DOUBLES / "sglang_python"),
             "--model-path", str(tok), "--tokenizer", str(tok)]
    env = campaign_env(host)

    held = run_cli("resume", archive.name, *paths, cwd=host, env=env)
    assert held.returncode == 1, held.stdout[-3000:] + held.stderr
    run = only_run(host)
    assert "resume stopped before any GPU job" in held.stdout and "--accept-changes" in held.stdout
    assert "evidence: SGLang source" in held.stdout  # the diff is shown
    assert not (run / "jobs").exists() or not list((run / "jobs").iterdir())  # no job launched
    shown = (run / "changes.md").read_text()
    assert "evidence: SGLang source" in shown
    assert json.loads((run / "result.json").read_text())["status"] == "planned"

    again = run_cli("resume", str(run), "--sglang-python", str(DOUBLES / "sglang_python"), cwd=host, env=env)
    assert_refusal(again, "--accept-changes")
    assert not (run / "jobs").exists() or not list((run / "jobs").iterdir())

    accepted = run_cli("resume", str(run), "--accept-changes", cwd=host, env=env)
    assert accepted.returncode == 0, accepted.stdout[-3000:] + accepted.stderr
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "finished", result
    assert not (run / "changes.json").exists() and (run / "changes.md").exists()  # the record stays


def test_a_benchmark_of_a_hub_model_on_a_host_without_the_hub_is_refused_before_a_run(tmp_path, sglang_wheel_root):
    args = campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP")
    local = args.index("--model-path")
    del args[local:local + 4]  # --model-path and --tokenizer left out: the model is only a hub id
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # bound, never listening: the "hub" refuses every connection
        hub = f"http://127.0.0.1:{held.getsockname()[1]}"
        env = {**campaign_env(tmp_path), "HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / "hf")}
        out = run_cli(*args, cwd=tmp_path, env=env)
    assert_refusal(out, hub, "--model-path DIR", "--tokenizer DIR")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())  # stopped before a run

    planned = run_cli(*args, "--plan-only", cwd=tmp_path, env=env)  # nothing loads the model: not checked
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr


def test_a_failed_job_says_why_from_its_log(tmp_path):
    from tools.jobs.local import LocalExecutor
    from tools.jobs.spec import JobSpec

    run = tmp_path / "runs" / "20260101T000000Z-enable-mtp"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": {}}))
    executor = LocalExecutor(run / "jobs")
    script = "import sys; print('loading'); print('OSError: cannot reach the hub for tok', file=sys.stderr); sys.exit(1)"
    executor.launch(JobSpec(key="bench-x", argv=[sys.executable, "-c", script], kind="bench", lane="gpu", gpus=[]))
    state = wait_for(lambda: (s := executor.poll("bench-x")).status == "failed" and s, 60, "the job to fail")
    assert state.reason == "exit code 1: OSError: cannot reach the hub for tok"
    listed = run_cli("jobs", str(run), "--json", cwd=tmp_path)
    assert "OSError: cannot reach the hub for tok" in listed.stdout, listed.stdout + listed.stderr
