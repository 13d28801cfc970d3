"""Longest-first assignment, the rendered scripts (quoting, shellcheck, driver), progress parsing."""
import itertools
import json
import subprocess
import sys

from hypothesis import given, settings, strategies as st

from tests.tuning_fixtures import SCRIPT_DOUBLE
from tools.tuning.plan import DEFAULT_BATCH_SIZES, assign_longest_first, lower_bound, make_units, plan_units
from tools.tuning.progress import parse_progress
from tools.tuning.render import render_tuning, shellcheck, shellcheck_binary
from tools.tuning.script import introspect_script, introspect_source
from tools.tuning.shapes import parse_user_shapes


def _optimum(costs, workers):
    best = float("inf")
    for choice in itertools.product(range(workers), repeat=len(costs)):
        loads = [0.0] * workers
        for cost, w in zip(costs, choice):
            loads[w] += cost
        best = min(best, max(loads))
    return best


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=7), st.integers(1, 3))
def test_longest_first_assigns_each_unit_once_and_stays_within_4_3_of_optimal(costs, workers):
    buckets = assign_longest_first(costs, workers)
    assert sorted(i for b in buckets for i in b) == list(range(len(costs)))
    makespan = max(sum(costs[i] for i in b) for b in buckets)
    optimum = _optimum(costs, workers)
    assert lower_bound(costs, workers) <= optimum + 1e-9  # the bound the benchmark divides by is a bound
    assert makespan <= optimum * 4 / 3 + 1e-9


def test_plan_balances_sglang_batch_sizes_over_gpus():
    shapes = parse_user_shapes(["4096,7168", "7168,2048", "3072,1536", "576,7168"])
    plan = plan_units(make_units(shapes, DEFAULT_BATCH_SIZES), [0, 1, 2, 3])
    assert plan.total_units == 4 * len(DEFAULT_BATCH_SIZES)
    assert plan.ratio <= 1.10


def _work(gpus=(0, 1)):
    shapes = parse_user_shapes(["4096,7168", "7168,2048"])
    return plan_units(make_units(shapes, [1, 64, 4096]), list(gpus)).per_gpu


def test_driver_mode_scripts_quote_hostile_paths_and_pass_shellcheck(tmp_path):
    info = introspect_script(SCRIPT_DOUBLE)
    hostile_python = "/opt/my env/bin/python3 $(touch /tmp/pwned)"
    rendered = render_tuning(tmp_path / "tuning", _work(), info, python=hostile_python, device_name="NVIDIA H200")
    assert rendered.mode == "driver"
    assert set(rendered.files) >= {"tuning/tune_driver.py", "tuning/units_gpu0.json", "tuning/tune_gpu1.sh"}
    script = (tmp_path / "tuning/tune_gpu0.sh").read_text()
    assert "'/opt/my env/bin/python3 $(touch /tmp/pwned)'" in script
    assert "export CUDA_VISIBLE_DEVICES=0" in script
    units = json.loads((tmp_path / "tuning/units_gpu1.json").read_text())["units"]
    assert units and all(set(u) >= {"n", "k", "m", "block_n", "block_k"} for u in units)
    subprocess.run(["bash", "-n", str(tmp_path / "tuning/tune_gpu0.sh")], check=True)
    if shellcheck_binary():
        assert shellcheck([tmp_path / "tuning/tune_gpu0.sh", tmp_path / "tuning/tune_gpu1.sh"]) == ""


def test_direct_mode_when_the_script_takes_shapes(tmp_path):
    source = SCRIPT_DOUBLE.read_text().replace(
        'parser.add_argument("--batch-size", type=int, required=False)',
        'parser.add_argument("--N", type=int)\n    parser.add_argument("--K", type=int)\n'
        '    parser.add_argument("--batch-sizes", type=int, nargs="+")')
    info = introspect_source(source, "/src/sglang/benchmark/kernels/quantization/tuning_block_wise_kernel.py")
    rendered = render_tuning(tmp_path / "tuning", _work([3]), info, python="python3", device_name="NVIDIA H200")
    assert rendered.mode == "direct" and "tuning/tune_driver.py" not in rendered.files
    script = (tmp_path / "tuning/tune_gpu3.sh").read_text()
    assert "--N 4096 --K 7168 --batch-sizes 1 64 4096" in script
    assert "'N=4096,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json'" in script
    if shellcheck_binary():
        assert shellcheck([tmp_path / "tuning/tune_gpu3.sh"]) == ""


def test_progress_from_driver_lines_real_script_lines_and_tqdm():
    log = ("[dsv4-agent] tuning N=1 K=2 M=4\n[dsv4-agent] unit done N=1 K=2 M=4 (1/3)\n"
           "[dsv4-agent] unit skipped N=1 K=2 M=8 (already saved) (2/3)\n"
           "[GPU 0] Tune for weight shape of `N: 5, K: 6`\n"
           "GPU 0 - Batch sizes:  50%|#####     | 9/18 [00:03<00:03]\r"
           "GPU 0 - Batch sizes: 100%|##########| 18/18 [00:06<00:00]\n"
           "Writing best config to out/N=5,K=6,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json...\n")
    progress = parse_progress(log, {(5, 6): [1, 2]})
    assert progress.done_units == ["N1-K2-M4", "N1-K2-M8", "N5-K6-M1", "N5-K6-M2"]
    assert progress.current_shape == "N=5 K=6" and progress.bar == "GPU 0 - Batch sizes 18/18"
    assert not progress.finished and parse_progress(log + "[dsv4-agent] all units done in 1 s\n").finished


def test_generated_driver_runs_the_script_double_and_skips_saved_units(tmp_path):
    info = introspect_script(SCRIPT_DOUBLE)
    render_tuning(tmp_path / "tuning", _work([0]), info, python=sys.executable, device_name="NVIDIA H200")
    calls = tmp_path / "calls.txt"
    env = {"PATH": "/usr/bin:/bin", "DSV4_DOUBLE_CALLS": str(calls), "DSV4_DOUBLE_UNIT_S": "0",
           "DSV4_SGLANG_PYTHON": sys.executable, "DSV4_TUNING_SCRIPT": str(SCRIPT_DOUBLE)}
    for _ in range(2):
        done = subprocess.run(["bash", str(tmp_path / "tuning/tune_gpu0.sh")], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert len(calls.read_text().splitlines()) == 6  # 2 shapes x 3 M, the second run skipped them all
    assert done.stdout.count("unit skipped") == 6
    out = tmp_path / "tuning/out/gpu0/N=4096,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    assert sorted(json.loads(out.read_text()), key=int) == ["1", "64", "4096"]
