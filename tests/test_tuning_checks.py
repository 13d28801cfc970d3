"""Config folder detection, config validation, engagement evidence, tuning-script introspection."""

import pytest

from tests.tuning_fixtures import LOADED_LINE, SCRIPT_DOUBLE, make_checkout
from tools.base import ToolError
from tools.tuning.configs import (LookupConfigsArgs, find_config_dir, lookup_configs, parse_config_file_name,
                                  read_config_file)
from tools.tuning.engagement import EngagementArgs, check_engagement, read_deepgemm_switch
from tools.tuning.script import find_script, introspect_script, introspect_source


def test_config_dir_of_the_real_wheel_and_of_an_older_layout(sglang_wheel_root, tmp_path):
    assert find_config_dir(sglang_wheel_root) == sglang_wheel_root / "sglang/kernels/ops/gemm/configs"
    old = tmp_path / "old"
    (old / "sglang/srt/layers/quantization/configs").mkdir(parents=True)
    (old / "sglang/__init__.py").write_text("")
    (old / "sglang/srt/layers/quantization/fp8_kernel.py").write_text("")
    assert find_config_dir(old) == old / "sglang/srt/layers/quantization/configs"
    checkout = make_checkout(tmp_path / "co")
    assert find_config_dir(checkout) == checkout / "python/sglang/kernels/ops/gemm/configs"
    with pytest.raises(ToolError, match="--sglang-src"):
        find_config_dir(tmp_path / "nothing")


def test_lookup_finds_shipped_h200_configs_in_the_wheel(sglang_wheel_root):
    result = lookup_configs(LookupConfigsArgs(sglang_root=str(sglang_wheel_root), device_name="NVIDIA H200",
                                              shapes=["3072,1536", "12345,678"]))
    assert list(result.existing) == ["3072,1536"] and result.missing == ["12345,678"]
    parsed = parse_config_file_name(result.existing["3072,1536"])
    assert parsed == {"n": 3072, "k": 1536, "device_name": "NVIDIA_H200", "dtype": "fp8_w8a8",
                      "block_n": 128, "block_k": 128}
    assert len(read_config_file(result.existing["3072,1536"])) > 5  # a real shipped file validates


@pytest.mark.parametrize("content, message", [
    ('{"1": {"BLOCK_SIZE_M": 16', "not valid JSON"),
    ('{"one": {}}', "not an integer batch size"),
    ('{"1": {"BLOCK_SIZE_M": 16}}', "missing"),
    ('{}', "non-empty JSON object"),
])
def test_corrupt_or_partial_config_files_are_named_with_a_fix(tmp_path, content, message):
    path = tmp_path / "N=1,K=2,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json"
    path.write_text(content)
    with pytest.raises(ToolError, match=message) as err:
        read_config_file(path)
    assert str(path) in str(err.value)


def test_deepgemm_switch_is_read_from_the_real_source(sglang_wheel_root):
    switch = read_deepgemm_switch(sglang_wheel_root)
    assert switch.name == "SGLANG_ENABLE_JIT_DEEPGEMM" and switch.default is True
    assert switch.where.startswith("sglang/srt/environ.py:")


def test_engagement_verdicts_follow_the_evidence(sglang_wheel_root):
    root = str(sglang_wheel_root)
    h200 = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", sglang_root=root))
    assert h200.verdict == "not_engaged" and any("SGLANG_ENABLE_JIT_DEEPGEMM=unset" in e for e in h200.evidence)
    off = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", sglang_root=root,
                                          env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}))
    assert off.verdict == "engaged"
    assert check_engagement(EngagementArgs(gpu_name="NVIDIA A100-SXM4-80GB", sglang_root=root)).verdict == "engaged"
    flag = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", server_args=["--fp8-gemm-backend=triton"]))
    assert flag.verdict == "engaged" and "triton" in flag.evidence[-1]
    assert check_engagement(EngagementArgs(sglang_root=root)).verdict == "unknown"  # no GPU here
    # The server's own log beats every inference.
    log = LOADED_LINE.format(path="/x/N=1,K=2,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json")
    logged = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", sglang_root=root, log_text=log))
    assert logged.verdict == "engaged" and "server log" in logged.evidence[0]


def test_block_32_engagement_follows_sglangs_dispatch(sglang_wheel_root):
    """SGLang runs DeepGEMM's native block-32 GEMM on SM90 while DeepGEMM is on, Triton elsewhere."""
    root = str(sglang_wheel_root)
    block32 = {"block_n": 32, "block_k": 32, "sglang_root": root}
    hopper = check_engagement(EngagementArgs(gpu_name="NVIDIA H100 80GB HBM3", **block32))
    assert hopper.verdict == "not_engaged" and "fp8_utils.py" in hopper.evidence[-1]
    off = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}, **block32))
    assert off.verdict == "engaged"
    assert check_engagement(EngagementArgs(gpu_name="NVIDIA A100-SXM4-80GB", **block32)).verdict == "engaged"
    assert check_engagement(EngagementArgs(gpu_name="NVIDIA B200", **block32)).verdict == "engaged"
    flag = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", server_args=["--fp8-gemm-backend", "triton"],
                                           **block32))
    assert flag.verdict == "engaged" and flag.basis == "flag"
    assert check_engagement(EngagementArgs(**block32)).basis == "no_gpu"  # the GPU host decides
    other = check_engagement(EngagementArgs(gpu_name="NVIDIA H200", block_n=64, block_k=64, sglang_root=root))
    assert other.verdict == "engaged" and other.basis == "weight_block"


def test_introspection_of_the_classic_script_reads_flags_without_running_it():
    info = introspect_script(SCRIPT_DOUBLE)
    assert info.flag("--tp-size").names == ["--tp-size", "-tp"]
    assert info.flag("--out-dtype").choices == ["float32", "float16", "bfloat16", "half"]
    assert info.batch_flag == "--batch-size" and info.batch_list_flag is None
    assert info.save_flag == "--save-path"
    assert not info.accepts_shapes and info.drivable
    assert info.functions["tune"] == ["M", "N", "K", "block_size", "out_dtype", "search_space", "input_type"]


def test_introspection_of_a_newer_script_with_shape_flags():
    source = '''
import argparse
def tune(M, N, K, block_size, out_dtype, search_space, input_type): ...
if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--N", type=int)
    p.add_argument("--K", type=int)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--save-path", type=str, default="configs")
'''
    info = introspect_source(source)
    assert info.accepts_shapes and info.batch_list_flag == "--batch-sizes" and info.save_flag == "--save-path"
    assert info.flag("--batch-sizes").nargs == "'+'"


def test_wheel_has_no_tuning_script_and_the_error_says_how_to_get_one(sglang_wheel_root):
    with pytest.raises(ToolError, match="git clone https://github.com/sgl-project/sglang"):
        find_script(sglang_wheel_root)
