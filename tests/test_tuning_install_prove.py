"""Install is all-or-nothing with backups; uninstall restores exactly; proof from the server log."""
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.tuning_fixtures import DEFAULT_LINE, LOADED_LINE, triton_config
from tools.base import ToolError
from tools.tuning.configs import config_file_name
from tools.tuning.install import install_configs, load_manifest, uninstall_configs
from tools.tuning.merge import merge_outputs
from tools.tuning.prove import prove_configs_loaded

A, B = config_file_name(4096, 7168, "NVIDIA H200"), config_file_name(7168, 2048, "NVIDIA H200")


def _snapshot(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _merged(tmp_path):
    merged = tmp_path / "merged"
    merged.mkdir()
    for name in (A, B):
        (merged / name).write_text(json.dumps({"1": triton_config(1), "64": triton_config(64)}))
    return [merged / A, merged / B]


def _configs(tmp_path):
    folder = tmp_path / "site" / "sglang" / "kernels" / "ops" / "gemm" / "configs"  # where SGLang reads them
    folder.mkdir(parents=True)
    (folder.parent / "fp8_kernel.py").write_text("")
    (folder / A).write_text(json.dumps({"8": triton_config(8)}))  # replaced, so backed up
    (folder / "unrelated.json").write_text("{}")
    return folder


def test_merge_joins_per_process_maps_and_reports_missing_units(tmp_path):
    for gpu, ms in ((0, [1, 64]), (1, [16])):
        folder = tmp_path / "out" / f"gpu{gpu}"
        folder.mkdir(parents=True)
        (folder / A).write_text(json.dumps({str(m): triton_config(m) for m in ms}))
    result = merge_outputs(tmp_path / "out", tmp_path / "merged", ["N4096-K7168-M1", "N4096-K7168-M16", "N4096-K7168-M4096"])
    assert result.files[0].batch_sizes == [1, 16, 64] and len(result.files[0].sources) == 2
    assert result.missing_units == ["N4096-K7168-M4096"]
    (tmp_path / "out/gpu1" / A).write_text('{"16": {"BLOCK_SIZE_M"')  # a torn partial file
    with pytest.raises(ToolError, match="not valid JSON.*killed while writing"):
        merge_outputs(tmp_path / "out", tmp_path / "merged2")


def test_a_failure_midway_rolls_back_so_nothing_is_half_installed(tmp_path):
    folder = _configs(tmp_path)
    (folder / f".{B}.dsv4-tmp").mkdir()  # blocks the second file's write: a failure after the first was written
    before = {p.name for p in folder.iterdir()}
    content_a = (folder / A).read_bytes()
    run_dir = tmp_path / "run"
    with pytest.raises(ToolError, match="rolled back"):
        install_configs(_merged(tmp_path), folder, run_dir)
    assert (folder / A).read_bytes() == content_a and {p.name for p in folder.iterdir()} == before
    assert load_manifest(run_dir / "tuning/manifest.json").state == "rolled_back"
    assert "nothing to do" in uninstall_configs(run_dir).note


def test_a_target_that_is_not_a_file_is_refused_up_front(tmp_path):
    folder = _configs(tmp_path)
    (folder / B).mkdir()
    with pytest.raises(ToolError, match="not a regular file"):
        install_configs(_merged(tmp_path), folder, tmp_path / "run")
    assert not (tmp_path / "run/tuning/manifest.json").exists()


def test_invalid_merged_file_is_refused_before_anything_is_written(tmp_path):
    folder = _configs(tmp_path)
    before = _snapshot(folder)
    files = _merged(tmp_path)
    files[1].write_text(json.dumps({"1": {"BLOCK_SIZE_M": 16}}))
    with pytest.raises(ToolError, match="missing"):
        install_configs(files, folder, tmp_path / "run")
    assert _snapshot(folder) == before and not (tmp_path / "run/tuning/manifest.json").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_unwritable_config_folder_gives_a_clear_message_and_installs_nothing(tmp_path):
    # /proc refuses new files even to root (a chmod'ed folder would not stop root): a real unwritable folder.
    with pytest.raises(ToolError, match=r"into /proc .*nothing is installed\. Fix the folder"):
        install_configs(_merged(tmp_path), Path("/proc"), tmp_path / "run")
    assert load_manifest(tmp_path / "run/tuning/manifest.json").state == "rolled_back"
    assert not any(Path("/proc", name).exists() for name in (A, B))


def test_uninstall_leaves_files_changed_since_install_unless_forced(tmp_path):
    folder = _configs(tmp_path)
    before = _snapshot(folder)
    run_dir = tmp_path / "run"
    install_configs(_merged(tmp_path), folder, run_dir)
    (folder / B).write_text(json.dumps({"2": triton_config(2)}))  # someone edited it afterwards
    result = uninstall_configs(run_dir)
    assert result.left_alone == [str(folder.resolve() / B)] and result.restored == [str(folder.resolve() / A)]
    forced = uninstall_configs(run_dir, force=True)
    assert _snapshot(folder) == before and forced.removed == [str(folder.resolve() / B)]


def test_prove_credits_only_files_the_server_logged_loading(tmp_path):
    folder = _configs(tmp_path)
    run_dir = tmp_path / "run"
    manifest = install_configs(_merged(tmp_path), folder, run_dir)
    target_a = manifest.entries[0].target
    log = tmp_path / "server.log"
    log.write_text("\n".join([LOADED_LINE.format(path=target_a), DEFAULT_LINE.format(n=7168, k=2048),
                              LOADED_LINE.format(path="/elsewhere/" + config_file_name(1, 2, "NVIDIA H200"))]))
    proof = prove_configs_loaded(run_dir / "tuning/manifest.json", [str(log)])
    assert proof.verdict == "partly_loaded" and proof.loaded == [target_a]
    assert proof.not_loaded == [manifest.entries[1].target] and len(proof.other_loaded) == 1
    assert "7168,K=2048" in proof.defaults_used[0]
    both = "\n".join(LOADED_LINE.format(path=e.target) for e in manifest.entries)
    assert prove_configs_loaded(run_dir / "tuning/manifest.json", both).verdict == "all_loaded"
    silent = prove_configs_loaded(run_dir / "tuning/manifest.json", "Load weight end.\n")
    assert silent.verdict == "no_evidence" and "did not run" in silent.evidence[-1]


def test_cli_shapes_plan_and_uninstall_errors(tmp_path):
    from agent.commands.cli import app

    runner = CliRunner()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["DeepseekV4ForCausalLM"], "hidden_size": 4096,
        "num_attention_heads": 64, "head_dim": 512, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
        "moe_intermediate_size": 2048, "n_shared_experts": 1,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}))
    shapes = runner.invoke(app, ["tuning", "shapes", "--model-path", str(tmp_path), "--tp", "8"])
    assert shapes.exit_code == 0 and "N=4096 K=1024" in shapes.output and "wq_b" in shapes.output
    plan = runner.invoke(app, ["tuning", "plan", "--shapes", "4096,7168", "--shapes", "7168,2048", "--gpu-count", "4"])
    assert plan.exit_code == 0 and "36 units" in plan.output and "GPU 3:" in plan.output
    missing = runner.invoke(app, ["tuning", "uninstall", str(tmp_path / "nope"), "--runs-dir", str(tmp_path)])
    assert missing.exit_code == 2  # a run that does not exist is a usage error
