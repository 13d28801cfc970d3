"""Which changed files matter: classified against the real sglang 0.5.23 wheel as corpus."""
from __future__ import annotations

from pathlib import Path

from tools.sync.impact import classify, impact_files, model_terms

DSV4 = "deepseek-ai/DeepSeek-V4-Flash"


def test_model_terms_cover_sglang_spellings():
    assert model_terms(DSV4) == ["deepseekv4", "dsv4"]
    assert "deepseekv4" in model_terms("/models/DeepSeek-V4-Flash-FP8", "DeepseekV4ForCausalLM", "deepseek_v4")
    assert model_terms("Qwen/Qwen3-235B-A22B-Instruct-2507") == ["qwen3"]
    assert model_terms("moonshotai/Kimi-K2-Instruct", "KimiK2ForCausalLM") == ["kimik2"]


def test_real_wheel_paths_are_classified(sglang_wheel_root: Path):
    terms = model_terms(DSV4, "DeepseekV4ForCausalLM")

    def read(path: str) -> str | None:
        file = sglang_wheel_root / path
        return file.read_text(errors="replace") if file.is_file() else None

    fp8_config = next(p for p in (sglang_wheel_root / "sglang/kernels/ops/gemm/configs").iterdir()
                      if "fp8_w8a8" in p.name)
    cases = {
        "sglang/srt/arg_groups/deepseek_v4_hook.py": "hook",
        "sglang/srt/arg_groups/overrides.py": "hook",  # mentions _deepseek_v4_kv_cache_dtype inside
        "sglang/srt/arg_groups/lora_hook.py": None,
        "sglang/srt/arg_groups/model_overrides/deepseek_v4.py": "override",
        "sglang/srt/arg_groups/model_overrides/qwen3_moe.py": None,
        "sglang/srt/arg_groups/speculative_hook.py": "speculative",
        "sglang/srt/arg_groups/fields/spec.py": "speculative",
        "sglang/srt/models/deepseek_v4.py": "model",
        "sglang/srt/models/deepseek_v4_nextn.py": "model",
        "sglang/srt/models/qwen3.py": None,
        "sglang/test/dsv41_flash_common.py": "registered_test",
        "sglang/test/server_fixtures/ngram_fixture.py": None,
        "sglang/kernels/ops/gemm/fp8_kernel.py": "fp8_kernel",
        f"sglang/kernels/ops/gemm/configs/{fp8_config.name}": "fp8_kernel",
        "sglang/benchmark/serving.py": "benchmark_client",
        "sglang/bench_serving.py": "benchmark_client",
        "sglang/srt/server_args.py": None,
    }
    for path, expected in cases.items():
        assert read(path) is not None, f"corpus lacks {path}"
        got = classify(path, terms, read)
        assert (got[0] if got else None) == expected, path


def test_checkout_layout_and_commit_attribution():
    texts = {"test/registered/spec/test_dsv4_mtp.py": "MODEL = 'deepseek-ai/DeepSeek-V4-Flash'\n",
             "test/registered/spec/test_llama_eagle.py": "MODEL = 'meta-llama/Llama-3.1-8B'\n"}
    changed = ["python/sglang/srt/arg_groups/deepseek_v4_hook.py", "python/pyproject.toml",
               "benchmark/kernels/quantization/tuning_block_wise_kernel.py", "docs/index.md", *texts]
    found = impact_files(changed, model_terms(DSV4), texts.get,
                         {"python/pyproject.toml": ["abc1234"]})
    assert [(f.category, f.path) for f in found] == [
        ("hook", "python/sglang/srt/arg_groups/deepseek_v4_hook.py"),
        ("registered_test", "test/registered/spec/test_dsv4_mtp.py"),
        ("tuning_script", "benchmark/kernels/quantization/tuning_block_wise_kernel.py"),
        ("packaging", "python/pyproject.toml"),
    ]
    assert found[-1].commits == ["abc1234"]
