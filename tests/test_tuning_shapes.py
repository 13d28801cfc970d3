"""Shapes: from the user, from SGLang's warning lines, from config.json (DeepSeek V3/V4)."""
import json

import pytest

from tests.tuning_fixtures import DEFAULT_LINE, V3_CONFIG, V4_FLASH_LIKE
from tools.base import ToolError
from tools.tuning.configs import config_file_name
from tools.tuning.shapes import FindShapesArgs, derive_from_config, find_shapes, mine_log, parse_user_shapes


def test_user_shapes_parse_and_reject_garbage():
    shapes = parse_user_shapes(["4096,7168", "7168x2048", "4096,7168"])
    assert [(s.n, s.k, s.source) for s in shapes] == [(4096, 7168, "user"), (7168, 2048, "user")]
    with pytest.raises(ToolError, match="--shapes 4096,7168"):
        parse_user_shapes(["4096"])


def test_mine_log_reads_sglang_default_config_warnings():
    log = "\n".join([
        "[2026-11-30 10:00:00 TP0] Load weight begin.",
        DEFAULT_LINE.format(n=4096, k=7168),
        DEFAULT_LINE.format(n=7168, k=2048),
        DEFAULT_LINE.format(n=4096, k=7168).replace("TP0", "TP1"),  # every rank warns: one shape
        "Using default MoE kernel config. Performance might be sub-optimal!",
    ])
    shapes, device = mine_log(log, "server.log")
    assert [(s.n, s.k, s.block_n, s.block_k) for s in shapes] == [(4096, 7168, 128, 128), (7168, 2048, 128, 128)]
    assert device == "NVIDIA_H200"
    assert shapes[0].source == "log:server.log"


def test_v3_derivation_at_tp8_matches_sglang_shipped_h200_configs(sglang_wheel_root):
    shapes, lines = derive_from_config(V3_CONFIG, tp=8)
    found = {(s.n, s.k) for s in shapes}
    # These are the TP-split shapes SGLang ships H200 configs for (tuned by its maintainers).
    for n, k in [(3072, 1536), (4096, 512), (7168, 2048), (4608, 7168), (7168, 2304), (512, 7168), (7168, 256)]:
        assert (n, k) in found
        folder = sglang_wheel_root / "sglang/kernels/ops/gemm/configs"
        assert (folder / config_file_name(n, k, "NVIDIA H200")).exists()
    assert (2112, 7168) in found  # fused q_a + kv_a, replicated
    assert any("q_b_proj" in line and "N=3072, K=1536" in line for line in lines)


def test_v4_derivation_writes_out_each_formula():
    shapes, lines = derive_from_config(V4_FLASH_LIKE, tp=4)
    assert {(s.n, s.k) for s in shapes} == {(1536, 4096), (8192, 1024), (4096, 2048), (1024, 4096), (4096, 512)}
    assert lines[0].startswith("DeepSeek V4 family (DeepseekV4ForCausalLM), TP=4")
    assert any("wo_a" in line for line in lines)  # says why it is not listed


def test_derivation_refuses_tp_that_does_not_divide():
    with pytest.raises(ToolError, match="not divisible by TP 3"):
        derive_from_config(V4_FLASH_LIKE, tp=3)


def test_unknown_architecture_and_unquantized_models_give_reasons():
    assert derive_from_config({"architectures": ["LlamaForCausalLM"], "hidden_size": 1}, 1)[0] == []
    config = dict(V3_CONFIG, quantization_config=None)
    shapes, lines = derive_from_config(config, 8)
    assert shapes == [] and "weight_block_size" in lines[0]


def test_find_shapes_precedence_user_then_log_then_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(V4_FLASH_LIKE))
    log = tmp_path / "server.log"
    log.write_text(DEFAULT_LINE.format(n=111, k=222) + "\n")
    user = find_shapes(FindShapesArgs(shapes=["1,2"], log_files=[str(log)], model_path=str(tmp_path), tp=4))
    assert [s.source for s in user.shapes] == ["user"]
    mined = find_shapes(FindShapesArgs(log_files=[str(log)], model_path=str(tmp_path), tp=4))
    assert [(s.n, s.k) for s in mined.shapes] == [(111, 222)]
    derived = find_shapes(FindShapesArgs(model_path=str(tmp_path), tp=4))
    assert len(derived.shapes) == 5 and derived.derivation
    nothing = find_shapes(FindShapesArgs())
    assert nothing.shapes == [] and "discovery" in nothing.note
