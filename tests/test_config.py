"""Settings precedence: CLI > ./dsv4-agent.toml > DSV4_* environment > defaults."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import SettingsError, load_settings


def test_defaults(tmp_path: Path):
    s = load_settings({}, cwd=tmp_path, environ={})
    assert s.model == "deepseek-ai/DeepSeek-V4-Flash" and s.runs_dir == "runs" and s.sglang_python == "python3"
    assert s.concurrency == [1, 8, 16] and s.llm_base_url is None and s.executor == "local"


def test_each_layer_overrides_the_one_below(tmp_path: Path):
    env = {"DSV4_MODEL": "env/model", "DSV4_RUNS_DIR": "env-runs", "DSV4_GPUS": "0,1", "DSV4_SGLANG_PYTHON": "envpy"}
    (tmp_path / "dsv4-agent.toml").write_text('model = "file/model"\nruns-dir = "file-runs"\n')
    s = load_settings({"model": "cli/model", "tp": None}, cwd=tmp_path, environ=env)
    assert s.model == "cli/model"            # CLI beats file and env
    assert s.runs_dir == "file-runs"         # file beats env
    assert s.gpus == [0, 1] and s.sglang_python == "envpy"  # env beats defaults
    assert s.tp is None                      # a CLI None means "not given"


def test_openai_environment_names_are_honoured_and_the_key_is_redacted(tmp_path: Path):
    s = load_settings({}, cwd=tmp_path, environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                                 "OPENAI_API_KEY": "sk-secretsecretsecret"})
    assert s.llm_base_url == "http://127.0.0.1:9/v1"
    assert s.llm_api_key.get_secret_value() == "sk-secretsecretsecret"
    assert "sk-secret" not in str(s.public_dump())


def test_bad_values_name_the_setting_and_its_source(tmp_path: Path):
    (tmp_path / "dsv4-agent.toml").write_text("colour = 'blue'\n")
    with pytest.raises(SettingsError, match=r"'colour' from .*dsv4-agent.toml: unknown setting"):
        load_settings({}, cwd=tmp_path, environ={})
    with pytest.raises(SettingsError, match="'tp' from environment"):
        load_settings({}, cwd=tmp_path / "none", environ={"DSV4_TP": "many"})
    (tmp_path / "dsv4-agent.toml").write_text("model = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings({}, cwd=tmp_path, environ={})
    with pytest.raises(SettingsError, match="concurrency"):
        load_settings({"concurrency": [0]}, cwd=tmp_path / "none", environ={})
