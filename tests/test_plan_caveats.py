"""At plan time the console and plan.md say when the kernel tuning asked for will not run or not matter
(agent/campaign/tuning_caveats.py), with the fix: a source without the tuning script, DeepGEMM on Hopper."""
from __future__ import annotations

from tests.campaign_fixtures import MODEL, campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli

LAPTOP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # no nvidia-smi: the run is planned


def test_a_wheel_without_the_tuning_script_is_said_at_plan_time(tmp_path, sglang_wheel_root):
    out = run_cli("tune kernels", "--model", MODEL, "--sglang", str(sglang_wheel_root), "--shapes", "512,1024",
                  cwd=tmp_path, env=LAPTOP_ENV)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    said = "kernel tuning will not run: "
    assert f"[control] note: {said}" in out.stdout and "tuning_block_wise_kernel.py" in out.stdout
    plan = (only_run(tmp_path) / "plan.md").read_text()
    section = plan.split("## What will not happen", 1)[1]
    assert said in section and "git clone https://github.com/sgl-project/sglang" in section  # the fix
    assert "DeepGEMM" in section  # the GPU host is unknown here: Hopper would not use the configs


def test_deepgemm_on_hopper_is_said_and_a_checkout_with_the_script_is_not_flagged(tmp_path, sglang_wheel_root):
    env = {**campaign_env(tmp_path), "DSV4_FAKE_GPU_NAME": "NVIDIA H100 80GB HBM3"}
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), "--plan-only", cwd=tmp_path,
                  env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    plan = (only_run(tmp_path) / "plan.md").read_text()
    assert "kernel tuning will not change the server" in plan and "SGLANG_ENABLE_JIT_DEEPGEMM=0" in plan
    assert "kernel tuning will not run" not in plan  # the checkout has the script
    assert "[control] note: kernel tuning will not change the server" in out.stdout

    a100 = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels"), "--plan-only",
                   "--runs-dir", "a100", cwd=tmp_path, env=campaign_env(tmp_path))  # the Triton path: nothing to say
    assert a100.returncode == 0, a100.stdout[-2000:] + a100.stderr
    assert "## What will not happen" not in next((tmp_path / "a100").iterdir()).joinpath("plan.md").read_text()
