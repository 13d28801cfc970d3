"""One GPU plan per campaign (issue 38): preflight makes it (tools/gpu_choice.py ``choose_gpus``) and
tuning, the serve scripts and their servers take it as it is. Through the CLI on a machine without
GPUs (no ``nvidia-smi`` on PATH), with the campaign's real SGLang tree and the tuning-script double
(tests/campaign_fixtures.py); every assertion is on the files the run writes."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.campaign_fixtures import campaign_args
from tests.cli_helpers import only_run, run_cli

NO_GPU = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi: nothing here to plan on


def _campaign(root: Path, wheel_root: Path, *gpu_args: str) -> Path:
    done = run_cli(*campaign_args(root, wheel_root), *gpu_args, cwd=root, env=NO_GPU)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return only_run(root)


def _tuning_gpus(run: Path) -> list[int]:
    """The GPUs the tuning scripts were written for: one tune_gpu<i>.sh each, pinned to its GPU."""
    gpus = []
    for script in sorted((run / "tuning").glob("tune_gpu*.sh")):
        index = int(re.fullmatch(r"tune_gpu(\d+)\.sh", script.name).group(1))
        assert f"export CUDA_VISIBLE_DEVICES={index}\n" in script.read_text()
        gpus.append(index)
    return sorted(gpus)


def _serve_plan(run: Path) -> tuple[str | None, str]:
    """The GPUs (None: CUDA_VISIBLE_DEVICES left as the caller sets it) and the TP serve_baseline.sh names."""
    serve = (run / "serve_baseline.sh").read_text()
    gpus = re.search(r"^export CUDA_VISIBLE_DEVICES=(\S+)$", serve, re.M)
    return (gpus.group(1) if gpus else None), re.search(r"^TP=\$\{TP:-(\d+)\}$", serve, re.M).group(1)


def _one_plan(run: Path) -> dict:
    """preflight.json's plan is the one the tuning outcome records; both scripts state it in the same words."""
    plan = json.loads((run / "preflight.json").read_text())["gpu_plan"]
    tuned = json.loads((run / "steps/tune_kernels.json").read_text())
    assert tuned["status"] == "planned" and tuned["reason"] == "no_gpu", tuned["summary"]
    assert tuned["data"]["gpu_plan"] == plan
    stated = next(line for line in (run / "tuning/plan.txt").read_text().splitlines() if line.startswith("GPU plan: "))
    assert f"# why: {stated}\n" in (run / "serve_baseline.sh").read_text()
    assert stated in tuned["summary"]
    return plan


def test_tp_4_without_gpus_plans_one_8_gpu_target_for_tuning_and_scripts(tmp_path, sglang_wheel_root):
    run = _campaign(tmp_path, sglang_wheel_root, "--tp", "4")
    plan = _one_plan(run)
    assert (plan["gpus"], plan["tp"], plan["node_gpus"], plan["for_target"]) == (None, 4, 8, True)
    assert _tuning_gpus(run) == list(range(8))  # one job per GPU of the 8-GPU target, not GPUs 0-3
    assert _serve_plan(run) == (None, "4")
    assert "a target node of 8 GPUs" in (run / "tuning/plan.txt").read_text()


@pytest.mark.parametrize("gpu_args, serve_gpus", [
    (["--target-gpus", "4", "--tp", "2"], None),
    (["--gpus", "0,1,2,3", "--tp", "2"], "0,1,2,3"),
])
def test_a_4_gpu_target_at_tp_2_is_one_plan_too(tmp_path, sglang_wheel_root, gpu_args, serve_gpus):
    run = _campaign(tmp_path, sglang_wheel_root, *gpu_args)
    plan = _one_plan(run)
    assert (plan["tp"], plan["node_gpus"]) == (2, 4)
    assert _tuning_gpus(run) == [0, 1, 2, 3]
    assert _serve_plan(run) == (serve_gpus, "2")


def test_multinode_scripts_are_sized_by_the_same_plan(tmp_path):
    """``--nodes 2`` for a 4-GPU target: the multi-node server spans 2 x 4 GPUs (the plan's node, not a
    guess of 8 per node), as preflight.json records it."""
    done = run_cli("benchmark", "--nodes", "2", "--target-gpus", "4", cwd=tmp_path, env=NO_GPU)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = only_run(tmp_path)
    plan = json.loads((run / "preflight.json").read_text())["gpu_plan"]
    assert (plan["node_gpus"], plan["nodes"], plan["multinode_tp"]) == (4, 2, 8)
    folder = run / "multinode" / "baseline"
    assert "--tp-size 8" in (folder / "serve-node1.sh").read_text()
    assert "#SBATCH --gres=gpu:4" in (folder / "serve-multinode.sbatch").read_text()
