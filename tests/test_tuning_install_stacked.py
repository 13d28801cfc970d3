"""Runs that install the same kernel configs stack, and are undone in any order.

Two runs (the second a ``--retune``) install a config for the same shape into one SGLang config
folder; one of them also replaces a config SGLang ships, the other adds one of its own. Uninstalled
through the CLI in either order, the folder ends byte-identical to before the first install (a hash of
every file); the first uninstall of a run a later one stacked on keeps the later one's file.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.tuning_fixtures import triton_config
from tools.tuning.configs import config_file_name
from tools.tuning.install import install_configs

SHIPPED = config_file_name(512, 1024, "NVIDIA H200")   # SGLang's own: both runs replace it
ONLY_A = config_file_name(4096, 7168, "NVIDIA H200")   # new: run A alone adds it
ONLY_B = config_file_name(7168, 2048, "NVIDIA H200")   # new: run B alone adds it


def _config_folder(root: Path) -> Path:
    folder = root / "site" / "sglang" / "kernels" / "ops" / "gemm" / "configs"  # SGLang's layout
    folder.mkdir(parents=True)
    (folder.parent / "fp8_kernel.py").write_text("# the kernel module that reads configs/\n")
    (folder / SHIPPED).write_text(json.dumps({"1": triton_config(1)}) + "\n")
    (folder / "README").write_text("not a config\n")
    return folder


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _install(root: Path, folder: Path, name: str, seed: int, names: list[str]) -> Path:
    run = root / "runs" / f"20260101T00000{seed}Z-{name}"
    merged = run / "tuning" / "merged"
    merged.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {"executor": "local"}}))
    for config in names:
        (merged / config).write_text(json.dumps({"1": triton_config(seed), "16": triton_config(seed + 1)}) + "\n")
    install_configs([merged / config for config in names], folder, run)
    return run


def _uninstall(root: Path, run: Path) -> str:
    out = run_cli("tuning", "uninstall", str(run), cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((run / "tuning" / "manifest.json").read_text())["state"] == "uninstalled"
    return out.stdout


@pytest.mark.parametrize("order", ["last-first", "first-first"])
def test_stacked_installs_uninstalled_in_any_order_leave_the_folder_as_before(tmp_path, order):
    folder = _config_folder(tmp_path)
    before = _hashes(folder)
    run_a = _install(tmp_path, folder, "a", 3, [SHIPPED, ONLY_A])
    after_a = _hashes(folder)
    run_b = _install(tmp_path, folder, "b", 5, [SHIPPED, ONLY_B])  # --retune: the same shape again
    assert _hashes(folder)[SHIPPED] not in (before[SHIPPED], after_a[SHIPPED])

    if order == "last-first":
        said = _uninstall(tmp_path, run_b)
        assert _hashes(folder) == after_a, said  # back to A's install exactly
        _uninstall(tmp_path, run_a)
    else:
        said = _uninstall(tmp_path, run_a)
        assert f"kept (a later run's install) {folder.resolve() / SHIPPED}" in said, said
        assert ONLY_A not in _hashes(folder)  # A's own file is gone; B's install of SHIPPED stays
        assert _hashes(folder)[SHIPPED] == hashlib.sha256((run_b / "tuning/merged" / SHIPPED).read_bytes()).hexdigest()
        _uninstall(tmp_path, run_b)
    assert _hashes(folder) == before


def test_a_changed_file_is_left_alone_and_force_restores_it_as_the_message_says(tmp_path):
    folder = _config_folder(tmp_path)
    before = _hashes(folder)
    run_a = _install(tmp_path, folder, "a", 3, [SHIPPED])
    run_b = _install(tmp_path, folder, "b", 5, [SHIPPED])
    (folder / SHIPPED).write_text(json.dumps({"1": triton_config(9)}) + "\n")  # edited by hand since
    refused = run_cli("tuning", "uninstall", str(run_b), cwd=tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "left alone (changed since install)" in refused.stdout and "--force" in refused.stdout, refused.stdout
    forced = run_cli("tuning", "uninstall", str(run_b), "--force", cwd=tmp_path)
    assert forced.returncode == 0 and f"restored {folder.resolve() / SHIPPED}" in forced.stdout, forced.stdout
    _uninstall(tmp_path, run_a)
    assert _hashes(folder) == before
