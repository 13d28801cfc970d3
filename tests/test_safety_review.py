"""Review on a GPU host (issue 13 item 3): ``--plan-only`` (``--dry-run``) writes every script and
starts no GPU job; ``dsv4-agent resume RUN`` then runs them, after saying which jobs it starts on
which GPUs. Through the CLI, on the doubles of tests/campaign_fixtures.py."""
from __future__ import annotations

import json

import pytest

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli


@pytest.mark.parametrize("flag", ["--plan-only", "--dry-run"])
def test_plan_only_writes_every_script_and_starts_no_gpu_job(tmp_path, sglang_wheel_root, flag):
    env = campaign_env(tmp_path)
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root), flag, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "planned"
    assert result["steps"]["tune_kernels"] == "planned" and result["steps"]["benchmark"] == "planned"
    assert result["next"].endswith(f"dsv4-agent resume {run.relative_to(tmp_path)}")
    assert not list(run.glob("jobs/*/job.json"))  # no job of any kind was launched
    assert not (tmp_path / "tune_calls.txt").exists()  # the tuning script never ran
    for script in ("tuning/tune_gpu0.sh", "tuning/tune_gpu1.sh", "serve_baseline.sh", "serve_mtp.sh",
                   "run_measure.sh", "server_check.py"):
        assert (run / script).exists(), script
    assert "--plan-only: no GPU job will start" in out.stdout
    if flag == "--plan-only":
        resumed = run_cli("resume", str(run), cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert json.loads((run / "result.json").read_text())["status"] == "finished"
        lines = resumed.stdout.splitlines()
        said = next(i for i, line in enumerate(lines) if "GPU jobs this campaign will start on GPUs 0 (" in line)
        started = next(i for i, line in enumerate(lines) if "job launched" in line)
        assert said < started  # what starts on which GPUs is said before the first job starts
        assert any("tune_kernels: kernel tuning, one job per GPU" in line for line in lines[said:started])
        assert (tmp_path / "tune_calls.txt").exists()
