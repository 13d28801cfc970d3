"""``jobs RUN`` and ``tuning uninstall RUN`` reach a run's host only under ``resume``'s rule
(agent/settings/run_reach.py): a crafted run folder naming an ``ssh://`` host (or Slurm) and ssh options that
write a marker file is refused in one line naming the setting and its option, exit 2, nothing run,
whether the user gives ssh options of their own or not; the same folder once allowed is reached."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import agent, run_cli
from tests.messages import assert_refusal, assert_run_setting_refused

HOST = "ssh://gpu-box.invalid"
NAME = "N=512,K=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
pytestmark = pytest.mark.no_replay("hand-made run folders, refused before anything runs")


def _crafted(tmp_path: Path, marker: Path, executor: str = HOST) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "jobs").mkdir(parents=True)
    settings = {"executor": executor, "ssh_options": [f"-oProxyCommand=touch {marker}; exit 1"]}
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": settings}))
    (run / "jobs" / "executor.json").write_text(json.dumps({"kind": "ssh", "url": executor,
                                                            "remote_root": ".dsv4-agent/runs/x/jobs"}))
    (run / "tuning").mkdir()
    target = f"/nonexistent/configs/{NAME}"
    manifest = {"version": 1, "state": "installed", "config_dir": "/nonexistent/configs", "created_at": 0.0,
                "entries": [{"name": NAME, "target": target, "source": "/nowhere", "sha256": "0" * 64}],
                "notes": [], "installed_by": executor}
    (run / "tuning" / "manifest.json").write_text(json.dumps(manifest))
    return run


@pytest.mark.parametrize("command", [["jobs"], ["jobs", "--stop", "all"], ["jobs", "--logs", "tune-gpu0"],
                                     ["tuning", "uninstall"]], ids=" ".join)
def test_a_run_folders_host_is_not_contacted(tmp_path, command):
    marker, mine = tmp_path / "folder-proxy-ran", tmp_path / "my-proxy-ran"
    run = _crafted(tmp_path, marker)
    assert_run_setting_refused(run_cli(*command, str(run), cwd=tmp_path), "executor", f"--executor={HOST}")
    # ssh options of the user's own do not make the folder's host theirs
    own_options = run_cli(*command, str(run), f"--ssh-option=-oProxyCommand=touch {mine}; exit 1", cwd=tmp_path)
    assert_run_setting_refused(own_options, "executor", f"--executor={HOST}")
    # the user names the host: its options are still the folder's
    own_host = run_cli(*command, str(run), "--executor", HOST, cwd=tmp_path)
    assert_run_setting_refused(own_host, "ssh_options", "--ssh-option=")
    assert not marker.exists() and not mine.exists()


def test_the_console_scripts_quick_jobs_applies_the_same_rule(tmp_path):
    marker = tmp_path / "folder-proxy-ran"
    run = _crafted(tmp_path, marker)
    quick = agent("jobs", str(run), cwd=tmp_path, env={"DSV4_CACHE_DIR": str(tmp_path / "cache")})
    assert_run_setting_refused(quick, "executor", f"--executor={HOST}")
    assert not marker.exists()


def test_a_slurm_run_folder_is_refused_unless_the_user_uses_that_slurm(tmp_path):
    run = _crafted(tmp_path, tmp_path / "unused", executor="slurm:gpu")
    assert_run_setting_refused(run_cli("jobs", str(run), cwd=tmp_path), "executor", "--executor=slurm:gpu")
    assert_run_setting_refused(run_cli("jobs", str(run), cwd=tmp_path, env={"DSV4_EXECUTOR": "slurm"}), "executor",
                               "--executor=slurm:gpu")  # another partition is another choice
    mine = run_cli("jobs", str(run), cwd=tmp_path, env={"DSV4_EXECUTOR": "slurm:gpu"})  # the user's own Slurm
    assert "setting " not in mine.stderr and "Traceback" not in mine.stderr, mine.stderr  # its ssh options unused


def test_the_host_the_user_gives_now_or_an_allowed_folder_is_reached(tmp_path):
    marker = tmp_path / "folder-proxy-ran"
    run = _crafted(tmp_path, marker)
    mine = tmp_path / "my-proxy-ran"
    given = run_cli("jobs", str(run), f"--ssh-option=-oProxyCommand=touch {mine}; exit 1", cwd=tmp_path,
                    env={"DSV4_EXECUTOR": HOST})  # the user's own host and options
    assert_refusal(given, HOST)  # the ssh call failed: said in one line
    assert mine.exists()
    assert not marker.exists()
    assert run_cli("config", "allow", str(run), cwd=tmp_path).returncode == 0
    allowed = run_cli("tuning", "uninstall", str(run), cwd=tmp_path)
    assert allowed.returncode != 0 and "Traceback" not in allowed.stderr, allowed.stderr
    assert marker.exists()  # the user vouched for the folder: its host and ProxyCommand are theirs
