"""kill -9 at every instant of an install or an uninstall of tuned configs, then recovery.

The install script (tools/tuning/host_install.py, the same code the agent runs locally and a GPU
host runs as a job) runs in a real process that SIGKILLs itself at the chosen call
(tests/fault_injector.py). Whatever the instant: installing again finishes the interrupted
install (the files it put there are never taken for originals), uninstalling restores the config
folder byte for byte, and an interrupted uninstall is finished by the next one.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tuning_fixtures import triton_config
from tests.slowdown import limit

REPO = Path(__file__).resolve().parent.parent
INJECTOR = REPO / "tests" / "fault_injector.py"
EXISTING = "N=512,K=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
NEW = "N=1024,K=512,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"

# (function, call number) where the install dies, and what it has done by then
INSTALL_KILLS = [
    ("save", 1),        # backups taken, manifest (intent) not yet written
    ("replace", 1),     # manifest written, nothing copied
    ("os.replace", 2),  # the first config copied to a temporary file in the folder, not yet renamed
    ("replace", 2),     # the first config installed, the second not: the first case
    ("save", 2),        # every config copied, the manifest not completed: the second case
]
UNINSTALL_KILLS = [("save", 1), ("put_back", 2), ("save", 2)]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "sglang/kernels/ops/gemm/configs"  # SGLang's layout: the only folders installs may touch
    folder.mkdir(parents=True)
    (folder.parent / "fp8_kernel.py").write_text("# the kernel module that reads configs/\n")
    (folder / EXISTING).write_text(json.dumps({"1": triton_config(1)}) + "\n")  # SGLang's own, to be replaced
    (folder / "README").write_text("not ours\n")
    return folder


def _merged(tmp_path: Path) -> list[Path]:
    out = tmp_path / "merged"
    out.mkdir()
    for name in (EXISTING, NEW):
        (out / name).write_text(json.dumps({"1": triton_config(7), "8": triton_config(8)}) + "\n")
    return [out / EXISTING, out / NEW]


def _state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _script(op: str, run: Path, folder: Path | None, merged: list[Path], kill: tuple[str, int] | None):
    argv = [op, str(run)] + (["local", "--config-dir", str(folder), *map(str, merged)] if op == "install" else [])
    if kill is None:
        return subprocess.run([sys.executable, str(REPO / "tools/tuning/host_install.py"), *argv],
                              capture_output=True, text=True)
    module, _, function = kill[0].rpartition(".")
    return subprocess.run([sys.executable, str(INJECTOR), f"{module or 'tools.tuning.host_install'}:{function}:{kill[1]}",
                           "tools.tuning.host_install:main", *argv], capture_output=True, text=True)


def _manifest(run: Path) -> dict:
    return json.loads((run / "tuning" / "manifest.json").read_text())


@pytest.mark.parametrize("kill", INSTALL_KILLS, ids=[f"{f}-{n}" for f, n in INSTALL_KILLS])
def test_an_install_killed_anywhere_is_finished_by_the_next_install(tmp_path, kill):
    folder, merged, run = _folder(tmp_path), _merged(tmp_path), tmp_path / "run"
    original = _state(folder)
    died = _script("install", run, folder, merged, kill)
    assert died.returncode == -signal.SIGKILL, died.stderr
    again = _script("install", run, folder, merged, None)
    assert again.returncode == 0, again.stderr
    manifest = _manifest(run)
    assert manifest["state"] == "installed" and len(manifest["entries"]) == 2
    backups = {Path(e["target"]).name: e["backup"] for e in manifest["entries"]}
    assert backups[NEW] is None and backups[EXISTING]  # the new file is ours, never an "original"
    assert (run / backups[EXISTING]).read_bytes() == original[EXISTING]
    assert _state(folder) == {**original, EXISTING: merged[0].read_bytes(), NEW: merged[1].read_bytes()}
    undo = _script("uninstall", run, None, [], None)
    assert undo.returncode == 0, undo.stderr
    assert _state(folder) == original


@pytest.mark.parametrize("kill", INSTALL_KILLS, ids=[f"{f}-{n}" for f, n in INSTALL_KILLS])
def test_uninstall_after_an_install_killed_anywhere_restores_the_folder_exactly(tmp_path, kill):
    folder, merged, run = _folder(tmp_path), _merged(tmp_path), tmp_path / "run"
    original = _state(folder)
    assert _script("install", run, folder, merged, kill).returncode == -signal.SIGKILL
    if (run / "tuning" / "manifest.json").exists():
        undo = _script("uninstall", run, None, [], None)
        assert undo.returncode == 0, undo.stderr
    assert _state(folder) == original


@pytest.mark.parametrize("kill", UNINSTALL_KILLS, ids=[f"{f}-{n}" for f, n in UNINSTALL_KILLS])
def test_an_uninstall_killed_anywhere_is_finished_by_the_next(tmp_path, kill):
    folder, merged, run = _folder(tmp_path), _merged(tmp_path), tmp_path / "run"
    original = _state(folder)
    assert _script("install", run, folder, merged, None).returncode == 0
    assert _script("uninstall", run, None, [], kill).returncode == -signal.SIGKILL
    undo = _script("uninstall", run, None, [], None)
    assert undo.returncode == 0, undo.stderr
    result = json.loads(undo.stdout)
    assert not result["left_alone"], result  # what the killed uninstall restored is not "changed since"
    assert _manifest(run)["state"] == "uninstalled" and _state(folder) == original


def test_uninstall_never_touches_a_file_outside_the_config_folder(tmp_path):
    folder, merged, run = _folder(tmp_path), _merged(tmp_path), tmp_path / "run"
    assert _script("install", run, folder, merged, None).returncode == 0
    outside = tmp_path / "precious.json"
    outside.write_bytes(merged[1].read_bytes())  # same bytes as one we installed
    manifest = _manifest(run)
    manifest["entries"][1]["target"] = str(outside)  # an edited manifest pointing elsewhere
    (run / "tuning" / "manifest.json").write_text(json.dumps(manifest))
    undo = _script("uninstall", run, None, [], None)
    assert undo.returncode == 0, undo.stderr
    assert outside.exists() and str(outside) in json.loads(undo.stdout)["not_ours"]


CAMPAIGN_KILLS = [("replace", 2), ("save", 2)]  # between the two configs; after the copies, before the manifest


@pytest.mark.parametrize("kill", CAMPAIGN_KILLS, ids=[f"{f}-{n}" for f, n in CAMPAIGN_KILLS])
def test_a_campaign_killed_mid_install_is_finished_by_resume_and_uninstalled_exactly(tmp_path, sglang_wheel_root,
                                                                                     kill):
    from tests.campaign_fixtures import campaign_args, campaign_env
    from tests.cli_helpers import clean_env, only_run, run_cli

    args = campaign_args(tmp_path, sglang_wheel_root, "tune kernels")
    folder = tmp_path / "sglang-checkout" / "python" / "sglang" / "kernels" / "ops" / "gemm" / "configs"
    original = _state(folder)
    env = campaign_env(tmp_path)
    died = subprocess.run([sys.executable, str(INJECTOR), f"tools.tuning.host_install:{kill[0]}:{kill[1]}",
                           "agent.commands.cli:main", *args], cwd=tmp_path, env=clean_env(env), capture_output=True,
                          text=True, timeout=limit(240))
    assert died.returncode == -signal.SIGKILL, died.stdout + died.stderr
    run = only_run(tmp_path)
    assert _manifest(run)["state"] == "installing" and _state(folder) != original

    resumed = run_cli("resume", "latest", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    outcome = json.loads((run / "steps" / "tune_kernels.json").read_text())
    assert outcome["status"] == "done" and "finished the install a crash had interrupted" in outcome["summary"]
    manifest = _manifest(run)
    assert manifest["state"] == "installed" and len(manifest["entries"]) == 2
    assert all(e["backup"] is None for e in manifest["entries"])  # both files are new: neither is an "original"

    undone = run_cli("tuning", "uninstall", str(run), cwd=tmp_path, env=env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert _state(folder) == original
