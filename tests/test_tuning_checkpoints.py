"""`tuning shapes` on every real checkpoint config in ../shared/checkpoints, through the CLI: the
target's and the drafter's block-FP8 GEMMs, V4.1's nested text_config and [32, 32] blocks, and a
one-line exit 2 for configs it cannot derive from."""
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.conftest import CHECKPOINT_NAMES as CHECKPOINTS, shared_checkpoints
from tests.messages import assert_refusal



def shapes(tmp_path, name_or_path, *extra):
    path = name_or_path if isinstance(name_or_path, Path) else shared_checkpoints() / name_or_path
    out = run_cli("tuning", "shapes", "--model-path", str(path), "--tp", "8", "--json", *extra, cwd=tmp_path)
    assert out.returncode == 0 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_every_real_checkpoint_gets_cited_shapes(tmp_path, name):
    found = shapes(tmp_path, name)
    assert found["shapes"] and all(s["block_n"] > 0 and s["block_k"] > 0 for s in found["shapes"])
    assert all("[srt/models/" in s["why"] for s in found["shapes"])  # each cites the SGLang model file
    text = run_cli("tuning", "shapes", "--model-path", str(shared_checkpoints() / name), "--tp", "8", cwd=tmp_path)
    assert text.returncode == 0 and "N=" in text.stdout and "Traceback" not in text.stdout + text.stderr


def _by_source(found: dict) -> dict[str, tuple[int, int, int, int]]:
    return {s["source"]: (s["n"], s["k"], s["block_n"], s["block_k"]) for s in found["shapes"]}


def test_v41_is_read_through_text_config_with_32_blocks_and_its_dspark_gemms(tmp_path):
    found = shapes(tmp_path, "DeepSeek-V4.1-Flash")
    assert {(s["block_n"], s["block_k"]) for s in found["shapes"]} == {(32, 32)}
    by_source = _by_source(found)
    assert by_source["config.json:attn.wqkv_a"] == (1280 + 512, 5120, 32, 32)  # hidden 5120 from text_config
    assert by_source["config.json:dspark.stages.0.main_proj"] == (5120, 5120 * 3, 32, 32)  # 3 target layers
    assert by_source["config.json:dspark.attn.wq_a"] == (1280, 5120, 32, 32)  # the stages' unfused attention
    text = "\n".join(found["derivation"])
    assert "config.json:text_config.hidden_size" in text and "config.json:quantization_config.weight_block_size" in text
    assert "srt/models/deepseek_v4_dspark.py:615" in text and "dspark_config.py:162" in text
    assert "dequantized" in text and "mtp_head" not in text  # DSpark, never an MTP head


def test_0731_lists_dspark_main_proj_and_the_preview_its_mtp_head(tmp_path):
    for name in ("DeepSeek-V4-Flash-0731", "0xSero--DeepSeek-V4-Flash-0731-REAP"):
        by_source = _by_source(shapes(tmp_path, name))
        assert by_source["config.json:dspark.stages.0.main_proj"] == (4096, 3 * 4096, 128, 128)
        assert not any(source.startswith("config.json:mtp_head.") for source in by_source)
    preview = shapes(tmp_path, "DeepSeek-V4-Flash")
    assert _by_source(preview)["config.json:mtp_head.e_proj"] == (4096, 4096, 128, 128)
    assert any("presumed from config.json:num_nextn_predict_layers" in line for line in preview["derivation"])
    assert not any(s["source"].startswith("config.json:dspark.") for s in preview["shapes"])
    pro = _by_source(shapes(tmp_path, "DeepSeek-V4-Pro-0813"))
    assert pro["config.json:dspark.stages.0.main_proj"] == (7168, 3 * 7168, 128, 128)


def test_v3_mtp_head_projection_is_left_out_with_the_reason(tmp_path):
    found = shapes(tmp_path, "DeepSeek-V3")
    assert any("eh_proj" in line and "srt/models/deepseek_nextn.py:102" in line for line in found["derivation"])
    assert (7168, 2048) in {(s["n"], s["k"]) for s in found["shapes"]}  # o_proj at TP 8


def test_drafters_can_be_chosen_and_a_missing_drafter_is_refused(tmp_path):
    checkpoint = shared_checkpoints() / "DeepSeek-V4-Flash-0731"
    none = shapes(tmp_path, checkpoint, "--drafter", "none")
    assert not any(s["source"].startswith(("config.json:dspark.", "config.json:mtp_head.")) for s in none["shapes"])
    out = run_cli("tuning", "shapes", "--model-path", str(shared_checkpoints() / "DeepSeek-V4-Flash"), "--tp", "8",
                  "--drafter", "dspark", cwd=tmp_path)
    config = shared_checkpoints() / "DeepSeek-V4-Flash" / "config.json"
    assert_refusal(out, "'dspark'", config, "DSpark", "--model-path")


def _v41_copy(tmp_path: Path, mutate) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    config = json.loads((shared_checkpoints() / "DeepSeek-V4.1-Flash" / "config.json").read_text())
    mutate(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _refused(tmp_path, path: Path, *names, tp="8"):
    out = run_cli("tuning", "shapes", "--model-path", str(path), "--tp", tp, cwd=tmp_path)
    assert_refusal(out, *names, quiet=True)


def test_bad_configs_give_one_line_and_exit_2(tmp_path):
    no_hidden = _v41_copy(tmp_path, lambda c: c["text_config"].pop("hidden_size"))
    _refused(tmp_path, no_hidden, "config.json:hidden_size", "missing", "--shapes N,K")
    bad_block = _v41_copy(tmp_path, lambda c: c["quantization_config"].update(weight_block_size=[32]))
    _refused(tmp_path, bad_block, "weight_block_size", "[32]")
    _refused(tmp_path, shared_checkpoints() / "DeepSeek-V4.1-Flash", "not divisible", "TP 3", tp="3")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{not json")
    _refused(tmp_path, tmp_path / "junk" / "config.json", "not valid JSON")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "config.json").write_bytes(b" " * (2 * 1024 * 1024))
    _refused(tmp_path, tmp_path / "big" / "config.json", "MB cap")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "config.json")  # opening it for reading must not wait for a writer
    _refused(tmp_path, tmp_path / "fifo" / "config.json", "not a regular file")
    _refused(tmp_path, tmp_path / "nowhere", "config.json", "--model-path")


def test_a_v41_copy_in_a_folder_of_its_own_is_read_like_the_original(tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(shared_checkpoints() / "DeepSeek-V4.1-Flash" / "config.json", folder / "config.json")
    assert shapes(tmp_path, folder)["shapes"] == shapes(tmp_path, "DeepSeek-V4.1-Flash")["shapes"]


def test_tune_kernels_campaign_on_a_v41_copy_tunes_its_32_blocks(tmp_path, sglang_wheel_root):
    """The campaign on the doubles (A100s: SGLang serves [32, 32] blocks with Triton there) derives the
    shapes from V4.1's nested config, tunes them at block 32 and installs tables named as SGLang looks
    them up."""
    from tests.campaign_fixtures import GPU_NAME, campaign_args, campaign_env
    from tests.cli_helpers import only_run

    args = campaign_args(tmp_path, sglang_wheel_root, goal="tune kernels")
    model = tmp_path / "v41"
    shutil.copytree(tmp_path / "tok", model)
    shutil.copy(shared_checkpoints() / "DeepSeek-V4.1-Flash" / "config.json", model / "config.json")
    kept, skip = [], False
    for arg in args:  # no --shapes: they come from the checkpoint
        if skip or arg == "--shapes":
            skip = not skip
            continue
        kept.append(str(model) if kept and kept[-1] == "--model-path" else arg)
    out = run_cli(*kept, cwd=tmp_path, env=campaign_env(tmp_path, unit_s=0.0))
    assert out.returncode == 0 and "hidden_size" not in out.stdout + out.stderr, out.stdout + out.stderr
    run = only_run(tmp_path)
    step = json.loads((run / "tuning/shapes.json").read_text())
    assert step["decision"] == "tune" and {(s["block_n"], s["block_k"]) for s in step["to_tune"]} == {(32, 32)}
    assert any(s["source"] == "config.json:dspark.stages.0.main_proj" for s in step["to_tune"])
    manifest = json.loads((run / "tuning/manifest.json").read_text())
    installed = {Path(e["target"]).name for e in manifest["entries"]}
    assert f"N=5120,K=15360,device_name={GPU_NAME.replace(' ', '_')},dtype=fp8_w8a8,block_shape=[32, 32].json" in installed
    assert len(installed) == len(step["to_tune"])
