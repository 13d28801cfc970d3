"""tune_kernels without a GPU: ``planned`` whenever the GPU host could decide otherwise (a resumed
run re-runs planned steps and reuses skipped ones), ``skipped`` only for verdicts that hold
everywhere. The campaign case runs the real console script in a fresh folder, as a user would."""
import json
from pathlib import Path

from agent.steps.base import PlanStep
from agent.steps.tune_kernels import run
from tests.cli_helpers import only_run, run_cli
from tests.tune_step_fixtures import tune_context
from tests.tuning_fixtures import V4_FLASH_LIKE, make_checkout, triton_config
from tools.tuning.configs import config_file_name


def _step(**params) -> PlanStep:
    return PlanStep(kind="tune_kernels", lane="gpu", why="goal says tune kernels", params=params)


def test_default_campaign_on_a_laptop_plans_tuning_for_the_gpu_host(tmp_path):
    done = run_cli("enable MTP and tune kernels", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads((only_run(tmp_path) / "steps/tune_kernels.json").read_text())
    assert outcome["status"] == "planned" and outcome["reason"] == "no_shapes", outcome["summary"]
    assert "no GPU here" in outcome["summary"] and "discovery" in outcome["data"]["gpu_host_will"]
    assert "dsv4-agent resume" in outcome["summary"]
    assert "tune_kernels: planned" in done.stdout


def test_no_shapes_without_gpu_is_planned_not_skipped(tmp_path):
    ctx = tune_context(tmp_path, [], make_checkout(tmp_path / "sglang"), shapes=[])
    outcome = run(ctx, _step())
    assert outcome.status == "planned" and outcome.reason == "no_shapes" and "discovery job" in outcome.summary
    assert outcome.data["shapes"] == [] and not (ctx.run.path / "jobs").exists()  # nothing booted here


def test_a_model_without_block_fp8_weights_is_skipped_everywhere(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**V4_FLASH_LIKE, "quantization_config": None}))
    ctx = tune_context(tmp_path, [], make_checkout(tmp_path / "sglang"), shapes=[], model_path=str(model))
    outcome = run(ctx, _step())
    assert outcome.status == "skipped" and outcome.reason == "no_block_fp8"
    assert "no fp8 weight_block_size" in outcome.summary


def test_not_engaged_by_an_explicit_flag_is_final_but_by_gpu_architecture_waits(tmp_path):
    checkout = make_checkout(tmp_path / "sglang")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    flag = run(tune_context(tmp_path / "a", [], checkout), _step(server_args=["--fp8-gemm-backend", "deep_gemm"]))
    assert flag.status == "skipped" and flag.reason == "not_engaged" and flag.data["engaged"]["verdict"] == "not_engaged"
    # The same verdict predicted from a GPU name and this machine's environment: the GPU host's decide.
    arch = run(tune_context(tmp_path / "b", [], checkout), _step(device_name="NVIDIA H200"))
    assert arch.data["engaged"]["verdict"] == "not_engaged"
    assert arch.status == "planned" and arch.reason == "not_engaged" and "its GPU and environment" in arch.summary


def test_all_configured_for_a_named_gpu_waits_for_the_server_sglang(tmp_path):
    existing = {config_file_name(n, k, "NVIDIA A100-SXM4-80GB"): {"1": triton_config(1)}
                for n, k in ((4096, 7168), (7168, 2048), (3072, 1536))}
    checkout = make_checkout(tmp_path / "sglang", existing)
    outcome = run(tune_context(tmp_path, [], checkout), _step(device_name="NVIDIA A100-SXM4-80GB"))
    assert len(outcome.data["skipped_existing"]) == 3
    assert outcome.status == "planned" and outcome.reason == "all_configured"
    assert "config folder of the SGLang the server runs" in outcome.summary


def test_wheel_source_without_gpu_is_planned_with_how_to_get_a_checkout(tmp_path, sglang_wheel_root):
    ctx = tune_context(tmp_path, [], sglang_wheel_root, shapes=["12345,678"])
    outcome = run(ctx, _step(batch_sizes=[1]))
    assert outcome.status == "planned" and outcome.reason == "no_tuning_script" and "--sglang-src" in outcome.summary
    assert "git clone https://github.com/sgl-project/sglang" in outcome.summary
    assert Path(ctx.run.path / "tuning/plan.txt").exists()
