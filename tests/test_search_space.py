"""The fenced search space (tools/measure/search_space.py) on the real SGLang source and real checkpoint configs:
the step counts the hooks allow for an MTP head, adaptive drafting only where the tree defines the field, a
bundled DSpark drafter's block sizes only where a flag can set them, each point citing why it is allowed."""
from __future__ import annotations

import json
import shutil

from tests.conftest import shared_checkpoints
from tests.decision_fixtures import upstream_checkout
from tools.mtp.settings import MtpSettingsArgs, mtp_settings

STEPS = "--speculative-num-steps"


def _reap(tmp_path):
    """The 0731 config with the REAP checkpoint's tensor names: a bundled DSpark drafter, no MTP head."""
    folder = tmp_path / "reap"
    folder.mkdir()
    shutil.copy(shared_checkpoints() / "DeepSeek-V4-Flash-0731" / "config.json", folder / "config.json")
    names = (shared_checkpoints() / "0xSero--DeepSeek-V4-Flash-0731-REAP" / "weight_names.txt").read_text().split()
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}))
    return folder


def test_an_mtp_head_gets_every_step_count_up_to_the_evidence_and_no_adaptive_on_0_5_23(sglang_wheel_root):
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash", sglang=str(sglang_wheel_root),
                                          search=True))
    space = judged.space
    assert space is not None and space.max_steps is not None
    steps = sorted(int(p.flags[STEPS]) for p in space.points if STEPS in p.flags)
    assert steps == list(range(1, space.max_steps + 1))
    assert all(p.why for p in space.points) and all(p.flags["--speculative-eagle-topk"] == "1"
                                                    for p in space.points if p.source == "hooks")
    assert [p.name for p in judged.choices] == [p.name for p in space.points]
    assert any(f.startswith(f"step counts 1..{space.max_steps}") for f in space.fences)
    assert any("defines no speculative_adaptive" in f for f in space.fences)  # 0.5.23 has no such field


def test_a_dspark_drafter_keeps_its_own_block_where_no_flag_sets_it(tmp_path, sglang_wheel_root):
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash-0731", model_path=str(_reap(tmp_path)),
                                          sglang=str(sglang_wheel_root), search=True))
    space = judged.space
    assert [p.flags["--speculative-algorithm"] for p in space.points] == ["DSPARK"]
    assert any("defines no speculative_dspark_block_size field" in f for f in space.fences), space.fences
    assert space.max_steps is None


def test_a_dspark_drafter_gets_every_block_up_to_its_trained_one_where_a_flag_sets_it(tmp_path, sglang_wheel_root):
    checkout = upstream_checkout(tmp_path / "sglang", sglang_wheel_root)
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash-0731", model_path=str(_reap(tmp_path)),
                                          sglang=str(checkout), search=True))
    space = judged.space
    trained = judged.checkpoint.drafter_for("DSPARK").block_size
    blocks = sorted(int(p.flags["--speculative-dspark-block-size"]) for p in space.points
                    if "--speculative-dspark-block-size" in p.flags)
    assert trained and blocks == list(range(1, trained)), (trained, blocks)
    assert any(f.startswith(f"block sizes 1..{trained}") for f in space.fences)
    cited = [p for p in space.points if "--speculative-dspark-block-size" in p.flags]
    assert all("spec.py:" in p.origins["--speculative-dspark-block-size"] for p in cited)
