"""Settings precedence: CLI > DSV4_* environment > config file (--config, $DSV4_CONFIG, ./dsv4-agent.toml) > defaults."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.settings.model import Settings, SettingsError
from agent.settings.layers import load_settings
from agent.settings.config_file import ConfigFileError, allow


def test_defaults(tmp_path: Path):
    s = load_settings({}, cwd=tmp_path, environ={})
    assert s.model == "deepseek-ai/DeepSeek-V4-Flash" and s.runs_dir == "runs" and s.sglang_python == "python3"
    assert s.concurrency == [1, 8, 16] and s.llm_base_url is None and str(s.executor) == "local"
    assert s.repeats == 3  # the decision's default K: a median and a spread per point


def test_each_layer_overrides_the_one_below(tmp_path: Path):
    env = {"DSV4_MODEL": "env/model", "DSV4_RUNS_DIR": "env-runs", "DSV4_GPUS": "0,1"}
    (tmp_path / "dsv4-agent.toml").write_text('model = "file/model"\nruns-dir = "file-runs"\n'
                                              'sglang-python = "filepy"\ntp = 4\n')
    allow(tmp_path / "dsv4-agent.toml", set(Settings.model_fields))
    s = load_settings({"model": "cli/model", "tp": None}, cwd=tmp_path, environ=env)
    assert s.model == "cli/model"            # CLI beats env and file
    assert s.runs_dir == "env-runs"          # env beats file
    assert s.sglang_python == "filepy"       # file beats defaults
    assert s.gpus == [0, 1]                  # env beats defaults
    assert s.tp == 4                         # a CLI None means "not given"
    assert s.nodes == 1                      # nobody set it: the default


def test_config_option_names_the_file_and_a_named_file_must_exist(tmp_path: Path):
    (tmp_path / "dsv4-agent.toml").write_text('model = "cwd/model"\n')
    allow(tmp_path / "dsv4-agent.toml", set(Settings.model_fields))
    other = tmp_path / "cluster.toml"
    other.write_text('model = "cluster/model"\nexecutor = "slurm:gpu"\n')
    s = load_settings({}, cwd=tmp_path, environ={}, config=str(other))
    assert s.model == "cluster/model" and str(s.executor) == "slurm:gpu"  # ./dsv4-agent.toml is not read then
    via_env = load_settings({}, cwd=tmp_path, environ={"DSV4_CONFIG": "cluster.toml"})
    assert str(via_env.executor) == "slurm:gpu"
    assert load_settings({}, cwd=tmp_path, environ={"DSV4_CONFIG": "cluster.toml"}, config="dsv4-agent.toml"
                         ).model == "cwd/model"  # --config beats $DSV4_CONFIG
    with pytest.raises(SettingsError, match=r"config file .*missing.toml does not exist.*--config"):
        load_settings({}, cwd=tmp_path, environ={}, config="missing.toml")
    assert load_settings({}, cwd=tmp_path / "nowhere", environ={}).model == "deepseek-ai/DeepSeek-V4-Flash"


def test_openai_environment_names_are_honoured_below_dsv4_names_and_the_key_is_redacted(tmp_path: Path):
    s = load_settings({}, cwd=tmp_path, environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                                 "OPENAI_API_KEY": "sk-secretsecretsecret"})
    assert s.llm_base_url == "http://127.0.0.1:9/v1"
    assert s.llm_api_key.get_secret_value() == "sk-secretsecretsecret"
    assert "sk-secret" not in str(s.public_dump())
    both = load_settings({}, cwd=tmp_path, environ={"OPENAI_BASE_URL": "http://a/v1", "DSV4_LLM_BASE_URL": "http://b/v1"})
    assert both.llm_base_url == "http://b/v1"


def test_settings_alone_read_no_environment_or_file(tmp_path: Path, monkeypatch):
    """A recorded run's settings (resume, replay) are not changed by the replayer's environment."""
    monkeypatch.setenv("DSV4_MODEL", "env/model")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dsv4-agent.toml").write_text('model = "file/model"\n')
    assert Settings().model == "deepseek-ai/DeepSeek-V4-Flash"
    assert Settings.model_validate({"runs_dir": "r"}).model == "deepseek-ai/DeepSeek-V4-Flash"


def test_bad_values_name_the_setting_and_its_source(tmp_path: Path):
    (tmp_path / "dsv4-agent.toml").write_text("colour = 'blue'\n")
    with pytest.raises(ConfigFileError, match=r"'colour' from .*dsv4-agent.toml: unknown setting"):
        allow(tmp_path / "dsv4-agent.toml", set(Settings.model_fields))  # names no setting we know: not allowed
    with pytest.raises(SettingsError, match=r"'colour' from .*dsv4-agent.toml: unknown setting"):
        load_settings({}, cwd=tmp_path, environ={}, config="dsv4-agent.toml")
    with pytest.raises(SettingsError, match=r"'tp' from environment \(DSV4_TP\)"):
        load_settings({}, cwd=tmp_path / "none", environ={"DSV4_TP": "many"})
    (tmp_path / "dsv4-agent.toml").write_text("model = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings({}, cwd=tmp_path, environ={}, config="dsv4-agent.toml")
    with pytest.raises(SettingsError, match="concurrency"):
        load_settings({"concurrency": [0]}, cwd=tmp_path / "none", environ={})
    with pytest.raises(SettingsError, match=r"^--gpus takes GPU indices .* separated by commas, e\.g\. 0,1,2,3; 'x' is not one$"):
        load_settings({"gpus": "0,x"}, cwd=tmp_path / "none", environ={}, flags={"gpus": "--gpus"})
