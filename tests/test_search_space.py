"""The fenced search space (tools/mtp/search_space.py) on the real SGLang source and real checkpoint configs:
the step counts the hooks allow for an MTP head, adaptive drafting where the tree defines the field, a
bundled DSpark drafter's block sizes up to the one it was trained on, each point citing why it is allowed."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import shared_checkpoints
from tools.base import ToolError
from tools.mtp.settings import MtpSettingsArgs, mtp_settings

STEPS, ADAPTIVE, BLOCK = "--speculative-num-steps", "--speculative-adaptive", "--speculative-dspark-block-size"


def _reap(tmp_path):
    """The 0731 config with the REAP checkpoint's tensor names: a bundled DSpark drafter, no MTP head."""
    folder = tmp_path / "reap"
    folder.mkdir()
    shutil.copy(shared_checkpoints() / "DeepSeek-V4-Flash-0731" / "config.json", folder / "config.json")
    names = (shared_checkpoints() / "0xSero--DeepSeek-V4-Flash-0731-REAP" / "weight_names.txt").read_text().split()
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}))
    return folder


def test_an_mtp_head_gets_every_step_count_up_to_the_evidence_and_adaptive_where_the_tree_has_it(sglang_wheel_root):
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash", sglang=str(sglang_wheel_root),
                                          search=True))
    space = judged.space
    assert space is not None and space.max_steps is not None
    fixed = [p for p in space.points if ADAPTIVE not in p.flags]
    assert sorted(int(p.flags[STEPS]) for p in fixed) == list(range(1, space.max_steps + 1))
    assert all(p.why for p in space.points) and all(p.flags["--speculative-eagle-topk"] == "1" for p in space.points)
    assert [p.name for p in judged.choices] == [p.name for p in space.points]
    assert any(f.startswith(f"step counts 1..{space.max_steps}") for f in space.fences)
    adaptive = [p for p in space.points if ADAPTIVE in p.flags]  # 0.5.23 defines speculative_adaptive
    assert len(adaptive) == 1 and adaptive[0].flags[ADAPTIVE] == "" and "spec.py:" in adaptive[0].origins[ADAPTIVE]


def test_mtp_steps_outside_the_space_is_refused_naming_the_fence(sglang_wheel_root):
    with pytest.raises(ToolError, match=r"outside the search space.*step counts 1\.\.3"):
        mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash", sglang=str(sglang_wheel_root),
                                     search=True, mtp_steps=["6"]))
    inside = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash", sglang=str(sglang_wheel_root),
                                          search=True, mtp_steps=["2"]))
    assert "mtp-2-1-3" in [c.name for c in inside.choices]


def test_a_dspark_drafter_gets_every_block_up_to_its_trained_one(tmp_path, sglang_wheel_root):
    judged = mtp_settings(MtpSettingsArgs(model="deepseek-ai/DeepSeek-V4-Flash-0731", model_path=str(_reap(tmp_path)),
                                          sglang=str(sglang_wheel_root), search=True))
    space = judged.space
    trained = judged.checkpoint.drafter_for("DSPARK").block_size
    assert {p.flags["--speculative-algorithm"] for p in space.points} == {"DSPARK"} and space.max_steps is None
    blocks = sorted(int(p.flags[BLOCK]) for p in space.points if BLOCK in p.flags)
    assert trained and blocks == list(range(1, trained + 1)), (trained, blocks)  # its own block is the recommendation
    assert any(f.startswith(f"block sizes 1..{trained}") for f in space.fences)
    assert all("spec.py:" in p.origins[BLOCK] for p in space.points if p.source == "hooks")
