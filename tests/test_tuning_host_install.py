"""The standalone host install script (tools/tuning/host_install.py), run as a real subprocess with
the system python3 as it is on the GPU host: its manifest is the agent's format, install is all or
nothing, uninstall restores exactly. No doubles: real files in a temporary SGLang-shaped tree."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.tuning.install import Manifest
from tools.tuning.remote_install import write_host_script

from tests.slowdown import limit

GEMM = "sglang/kernels/ops/gemm"
NAME = "N=512,K=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
NEW = "N=1024,K=512,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
CONFIG = {"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                "num_warps": 4, "num_stages": 3}}


@pytest.fixture
def tree(tmp_path):
    site = tmp_path / "site"
    (site / GEMM / "configs").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / GEMM / "fp8_kernel.py").write_text("")
    (site / GEMM / "configs" / NAME).write_text('{"original": true}')
    run = tmp_path / "run"
    merged = run / "tuning" / "merged"
    merged.mkdir(parents=True)
    for name in (NAME, NEW):
        (merged / name).write_text(json.dumps(CONFIG))
    return site, run, merged


def _script(run: Path, *args: str) -> subprocess.CompletedProcess:
    python = shutil.which("python3")
    return subprocess.run([python, str(write_host_script(run)), *args], capture_output=True, text=True, timeout=limit(60))


def test_install_then_uninstall_restores_the_folder_exactly(tree):
    site, run, merged = tree
    configs = site / GEMM / "configs"
    before = {p.name: p.read_bytes() for p in configs.iterdir()}
    done = _script(run, "install", str(run), "ssh://gpu-box", "--sglang-src", str(site),
                   str(merged / NAME), str(merged / NEW))
    assert done.returncode == 0, done.stderr
    manifest = Manifest.model_validate_json((run / "tuning" / "manifest.json").read_text())  # the agent's format
    assert manifest.state == "installed" and manifest.installed_by == "ssh://gpu-box"
    assert manifest.config_dir == str(configs.resolve())
    assert {e.name: e.backup for e in manifest.entries} == {NAME: f"tuning/backup/{NAME}", NEW: None}
    assert json.loads((configs / NAME).read_text()) == CONFIG and (configs / NEW).exists()
    undone = _script(run, "uninstall", str(run))
    assert undone.returncode == 0, undone.stderr
    result = json.loads(undone.stdout.strip().splitlines()[-1])
    assert result["restored"] == [str(configs.resolve() / NAME)] and result["removed"] == [str(configs.resolve() / NEW)]
    assert {p.name: p.read_bytes() for p in configs.iterdir()} == before
    assert json.loads((run / "tuning" / "manifest.json").read_text())["state"] == "uninstalled"


def test_a_corrupt_merged_file_installs_nothing(tree):
    site, run, merged = tree
    configs = site / GEMM / "configs"
    (merged / NEW).write_text('{"1": {"BLOCK_SIZE_M": 0}}')
    done = _script(run, "install", str(run), "ssh://gpu-box", "--sglang-src", str(site),
                   str(merged / NAME), str(merged / NEW))
    assert done.returncode == 2 and "re-run the tuning step" in done.stderr
    assert (configs / NAME).read_text() == '{"original": true}' and not (configs / NEW).exists()
    assert not (run / "tuning" / "manifest.json").exists()


def test_unknown_sglang_on_the_host_names_the_fix(tree, tmp_path):
    _, run, merged = tree
    done = _script(run, "install", str(run), "ssh://gpu-box", "--sglang-python", shutil.which("python3"),
                   str(merged / NAME))
    assert done.returncode == 2 and "--sglang-python" in done.stderr and "has no sglang" in done.stderr
