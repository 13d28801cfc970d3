"""A run folder is data: ``jobs`` and ``tuning uninstall`` on crafted run folders neither run what
their ``config.json`` says (ssh options such as ``-oProxyCommand``) nor touch files their
``tuning/manifest.json`` names outside SGLang's kernel-config folder."""
from __future__ import annotations

import hashlib
import json
from agent.exit_codes import ExitCode
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.messages import assert_refusal, assert_run_setting_refused

NAME = "N=512,K=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"


def _ssh_run(tmp_path: Path, marker: Path) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "jobs").mkdir(parents=True)
    settings = {"executor": "ssh://gpu-box.invalid", "ssh_options": [f"-oProxyCommand=touch {marker}; exit 1"]}
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": settings}))
    (run / "jobs" / "executor.json").write_text(json.dumps({"kind": "ssh", "url": "ssh://gpu-box.invalid",
                                                            "remote_root": ".dsv4-agent/runs/x/jobs"}))
    return run


def test_jobs_never_runs_ssh_options_read_from_the_run_folder(tmp_path):
    marker = tmp_path / "proxy-command-ran"
    run = _ssh_run(tmp_path, marker)
    out = run_cli("jobs", str(run), "--executor", "ssh://gpu-box.invalid", cwd=tmp_path)
    assert_run_setting_refused(out, "ssh_options", "--ssh-option=")
    assert not marker.exists()
    # Options the user gives are used instead (here: nothing reaches the host, and nothing runs here).
    given = run_cli("jobs", str(run), "--executor", "ssh://gpu-box.invalid", "--ssh-option=-oConnectTimeout=2",
                    cwd=tmp_path)
    assert_refusal(given, "ssh", "ssh://gpu-box.invalid", "failed")
    assert not marker.exists()


def test_resume_never_runs_ssh_options_read_from_the_run_folder(tmp_path):
    marker = tmp_path / "proxy-command-ran"
    run = _ssh_run(tmp_path, marker)
    (run / "trace.jsonl").write_text("")
    out = run_cli("resume", str(run), cwd=tmp_path)
    assert_refusal(out, "never taken from a run folder", "dsv4-agent config allow")
    assert not marker.exists()


def _sglang_site(root: Path) -> Path:
    configs = root / "site" / "sglang" / "kernels" / "ops" / "gemm" / "configs"
    configs.mkdir(parents=True)
    (configs.parent / "fp8_kernel.py").write_text("")
    (root / "site" / "sglang" / "__init__.py").write_text("")
    return configs


def _manifest_run(tmp_path: Path, config_dir: Path, entries: list[dict]) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "tuning" / "backup").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    manifest = {"version": 1, "state": "installed", "config_dir": str(config_dir), "created_at": 0.0,
                "entries": entries, "notes": [], "installed_by": "local"}
    (run / "tuning" / "manifest.json").write_text(json.dumps(manifest))
    return run


def _entry(target: Path, backup: str | None = None, sha: str | None = None) -> dict:
    digest = sha or (hashlib.sha256(target.read_bytes()).hexdigest() if target.exists() else "0" * 64)
    return {"name": target.name, "target": str(target), "source": "/nowhere", "sha256": digest, "backup": backup}


def test_uninstall_refuses_a_manifest_naming_a_folder_that_is_not_sglangs(tmp_path):
    victim = tmp_path / "home" / ".ssh"
    victim.mkdir(parents=True)
    (victim / "authorized_keys").write_text("ssh-ed25519 AAAA mine\n")
    (victim / NAME).write_text("{}")  # even a file with a kernel config's name
    run = _manifest_run(tmp_path, victim, [_entry(victim / "authorized_keys"), _entry(victim / NAME)])
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    out = run_cli("tuning", "uninstall", str(run), "--force", cwd=tmp_path)
    assert_refusal(out, victim, "kernel-config folders", code=ExitCode.FAILED)
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before


@pytest.mark.parametrize("where", ["outside", "backup_outside", "not_a_config_name"])
def test_uninstall_leaves_entries_outside_the_config_folder_or_its_backups_alone(tmp_path, where):
    configs = _sglang_site(tmp_path)
    outside = tmp_path / "precious.json"
    outside.write_text('{"mine": true}')
    entries = {
        "outside": [_entry(configs / ".." / ".." / ".." / ".." / ".." / ".." / "precious.json")],
        "backup_outside": [_entry(configs / NAME, backup="../../precious.json")],
        "not_a_config_name": [_entry(configs / "unrelated.json")],
    }[where]
    (configs / NAME).write_text("{}")
    (configs / "unrelated.json").write_text("{}")
    run = _manifest_run(tmp_path, configs, entries)
    before = {p: p.read_bytes() for p in [outside, configs / NAME, configs / "unrelated.json"]}
    out = run_cli("tuning", "uninstall", str(run), "--force", cwd=tmp_path)  # --force: even files that changed
    assert out.returncode == 1 and "left alone" in out.stdout, out.stdout + out.stderr
    assert {p: p.read_bytes() for p in before} == before  # an entry the manifest may not name is never touched


def test_uninstall_touches_only_files_whose_checksum_the_manifest_matches(tmp_path):
    configs = _sglang_site(tmp_path)
    (configs / NAME).write_text('{"someone": "else"}')  # not what the manifest says was installed
    run = _manifest_run(tmp_path, configs, [_entry(configs / NAME, sha="1" * 64)])
    out = run_cli("tuning", "uninstall", str(run), cwd=tmp_path)
    assert out.returncode == 1 and "left alone" in out.stdout, out.stdout + out.stderr
    assert (configs / NAME).read_text() == '{"someone": "else"}'


SHIPPED = '{"1": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4, ' \
          '"num_stages": 3}}'


def test_uninstall_never_deletes_a_config_sglang_ships_that_a_crafted_manifest_names(tmp_path):
    """The manifest names the shipped file with its real checksum and no backup, so by the manifest
    alone the file 'was added by us'; no install record of ours says so, and it stays."""
    configs = _sglang_site(tmp_path)
    (configs / NAME).write_text(SHIPPED)
    run = _manifest_run(tmp_path, configs, [_entry(configs / NAME)])
    out = run_cli("tuning", "uninstall", str(run), "--force", cwd=tmp_path)
    assert out.returncode == 1 and "left alone" in out.stdout and "record" in out.stdout, out.stdout + out.stderr
    assert (configs / NAME).read_text() == SHIPPED


def test_a_manifest_copied_from_a_real_install_undoes_nothing_from_another_run_folder(tmp_path):
    from tools.tuning.install import install_configs

    configs = _sglang_site(tmp_path)
    (configs / NAME).write_text(SHIPPED)
    merged = tmp_path / "merged" / NAME
    merged.parent.mkdir()
    merged.write_text(SHIPPED.replace('"num_warps": 4', '"num_warps": 8'))
    real = tmp_path / "runs" / "20260101T000000Z-real"
    install_configs([merged], configs, real)
    assert (configs / NAME).read_text() == merged.read_text()
    copy = tmp_path / "runs" / "20260101T000001Z-copy"
    copy.mkdir()
    (copy / "tuning").mkdir()
    (copy / "tuning" / "manifest.json").write_text((real / "tuning" / "manifest.json").read_text())
    (copy / "tuning" / "backup").mkdir()
    (copy / "tuning" / "backup" / NAME).write_text('{"planted": 1}')  # would be "restored" into SGLang's folder
    (copy / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    out = run_cli("tuning", "uninstall", str(copy), "--force", cwd=tmp_path)
    assert out.returncode == 1 and "left alone" in out.stdout, out.stdout + out.stderr
    assert (configs / NAME).read_text() == merged.read_text()  # still our install, untouched
    (real / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    done = run_cli("tuning", "uninstall", str(real), cwd=tmp_path)  # the run that installed it undoes it
    assert done.returncode == 0 and "restored" in done.stdout, done.stdout + done.stderr
    assert (configs / NAME).read_text() == SHIPPED


def test_a_url_password_in_the_goal_is_written_nowhere_in_the_run_folder(tmp_path, sglang_wheel_root):
    password = "hunter2-goal-secret"
    goal = f"tune kernels with weights from https://deploy:{password}@models.example/v4 please"
    out = run_cli(goal, "--sglang", str(sglang_wheel_root), "--plan-only", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    run = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.name == "checkpoint.sqlite" for p in files) and any(p.name == "plan.md" for p in files)
    holding = [str(p.relative_to(run)) for p in files if password.encode() in p.read_bytes()]
    assert holding == []  # plan.md's ignored words, the graph's checkpoint, the trace, config.json
    assert password not in out.stdout + out.stderr
