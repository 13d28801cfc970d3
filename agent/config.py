"""One settings model, one precedence rule: command line > DSV4_* environment > config file > defaults.

``load_settings(cli_values)`` is the only place the layers meet. Each layer is a pydantic-settings
source (the environment and the TOML file parse values the way the library does); they are merged
here in order so that an error can name the layer a bad value came from. ``Settings(...)`` alone
reads nothing but its arguments, so a recorded run (resume, replay) is never changed by the
environment of whoever replays it. Secrets (the LLM key) are held as ``SecretStr`` and never
written: ``public_dump`` redacts them for ``config.json``.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings.exceptions import SettingsError as PydanticSettingsError
from pydantic_settings import (BaseSettings, EnvSettingsSource, InitSettingsSource, NoDecode,
                               PydanticBaseSettingsSource, SettingsConfigDict)

from agent.config_file import (CONFIG_ENV, WORKING_FOLDER, ConfigFile, ConfigFileError, check_allowed, config_path,
                               parsed, read_config)
from agent.secrets import redact, remember, url_password
from tools.jobs.executor_spec import ExecutorSetting, ExecutorSpec
from tools.scripts.models import ConcurrencyLevels
from tools.scripts.trust import check_allowed_flags
from tools.scripts.user_args import parse_server_args, parse_server_env

_SHAPE = re.compile(r"^0*[1-9][0-9]*\s*[,x]\s*0*[1-9][0-9]*$")
ENV_PREFIX = "DSV4_"


class SettingsError(Exception):
    """Bad configuration; the message names the setting, where it came from, and the fix."""


def _split_words(raw: Any) -> Any:
    """Lists may be given as one string, '0,1,2' or '0 1 2' (environment, --gpus)."""
    if isinstance(raw, str):
        return [p for p in raw.replace(",", " ").split() if p]
    return raw


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", env_prefix=ENV_PREFIX, validate_default=False)

    model: str = Field("deepseek-ai/DeepSeek-V4-Flash", description="HF id or local path of the served model")
    model_path: str | None = Field(None, description="Local checkpoint folder (config.json, tokenizer)")
    arch: str | None = Field(None, description="Model architecture class (e.g. DeepseekV4ForCausalLM) when no "
                             "config.json is given; else read from it or matched from the model id")
    sglang_src: str | None = Field(None, description="SGLang checkout or package dir; else auto-resolved")
    sglang_version: str = Field("0.5.23", description="PyPI version used when the source must be downloaded")
    sglang_python: str = Field("python3", description="Interpreter that has SGLang installed")
    gpus: Annotated[list[int] | None, NoDecode] = Field(None, description="GPU indices to use; None = every free GPU found")
    target_gpus: int | None = Field(None, ge=1, le=512, description="GPUs of the target when planning here without any")
    allow_busy_gpus: bool = Field(False, description="Use GPUs that other processes are using")
    plan_only: bool = Field(False, description="Write every script, start no GPU job (review first)")
    allow_flags: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Trust-widening server flags a recipe or the model may add, e.g. --trust-remote-code")
    server_args: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Flags for every server")
    server_env: Annotated[list[str], NoDecode] = Field(default_factory=list, description="NAME=VALUE for every server")
    runs_dir: str = Field("runs", description="Where run folders are created")
    executor: Annotated[ExecutorSetting, NoDecode] = Field(
        ExecutorSpec(kind="local"), description="local | ssh://user@host[:port] | slurm[:partition]")
    ssh_options: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                         description="Extra ssh arguments, e.g. -F ssh_config")
    nvidia_smi: str = Field("nvidia-smi", description="nvidia-smi on the GPU host (the SSH executor runs it there)")
    nodes: int = Field(1, ge=1, le=512, description="Nodes one server spans; >1 also writes multi-node scripts")
    dist_init_addr: str | None = Field(None, description="HOST:PORT of node 0 for multi-node serve scripts")
    pull: bool = Field(False, description="Fast-forward the SGLang checkout before the campaign")
    remote: str = Field("origin", description="Remote to pull from")
    branch: str = Field("main", description="Branch to pull")
    allow_dirty: bool = Field(False, description="Pull into a dirty checkout when upstream touches none of its changes")
    shapes: Annotated[list[str], NoDecode] = Field(default_factory=list, description="FP8 GEMM shapes 'N,K' to tune")
    retune: bool = Field(False, description="Tune shapes even when configs exist")
    force_tune: bool = Field(False, description="Tune even when evidence says Triton is not used")
    tp: int | None = Field(None, ge=1, description="Tensor parallel size; default = number of GPUs")
    concurrency: Annotated[ConcurrencyLevels, NoDecode] = Field(default_factory=lambda: [1, 8, 16],
                                                                description="Benchmark concurrency levels")
    tokenizer: str | None = Field(None, description="Local tokenizer path for offline benchmarks")
    input_len: int | None = Field(None, gt=0, description="Benchmark prompt length in tokens [1024]")
    output_len: int | None = Field(None, gt=0, description="Benchmark output length in tokens [1024]")
    prompts_per_concurrency: int | None = Field(None, gt=0, description="Prompts per point = this x concurrency, "
                                                "at least min_prompts [8]")
    min_prompts: int | None = Field(None, gt=0, description="Fewest prompts of any benchmark point [16]")
    repeats: int = Field(3, ge=1, description="Runs of every benchmark point on the same server (median, spread)")
    mtp_variants: int | None = Field(None, ge=1, description="Most MTP settings from the evidence to measure")
    mtp_steps: Annotated[list[str], NoDecode] = Field(default_factory=list,
                                                      description="Extra MTP settings: steps, or steps/topk/draft")
    accuracy_questions: int = Field(50, ge=1, description="GSM8K questions per variant for the accuracy gate")
    accuracy_data: str | None = Field(None, description="GSM8K test.jsonl for offline use (few_shot_gsm8k --data-path)")
    accuracy_tolerance: float | None = Field(None, ge=0, le=1, description="Accuracy drop allowed [95% interval]")
    max_ttft_ms: float | None = Field(None, gt=0, description="SLO: highest TTFT (ms) at the SLO percentile")
    max_tpot_ms: float | None = Field(None, gt=0, description="SLO: highest TPOT (ms) at the SLO percentile")
    slo_percentile: Literal["p50", "p90", "p95", "p99"] = Field("p99", description="Percentile the SLOs apply to")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint; unset = playbook")
    llm_model: str | None = Field(None, description="Model name at the LLM endpoint")
    llm_api_key: SecretStr | None = Field(None, description="API key of the LLM endpoint (never written)")
    accept_unsupported_flags: bool = Field(False, description="Write LLM-proposed flags that lack evidence")
    max_llm_steps: int = Field(30, gt=0, description="LLM budget: model turns before the run ends budget_exhausted")
    llm_max_tokens: int = Field(400_000, gt=0, description="LLM budget: total tokens (prompt + completion)")
    llm_max_seconds: float = Field(900.0, gt=0, description="LLM budget: seconds spent in model calls and tools")
    llm_stream: bool = Field(False, description="Stream the LLM's answers (Server-Sent Events)")
    # The settings file load_settings read (None: none); not a setting, never validated from input.
    _config_file: ConfigFile | None = PrivateAttr(None)

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_list(cls, raw: Any) -> Any:
        return parse_gpu_list(raw) if isinstance(raw, str) else raw

    @field_validator("gpus")
    @classmethod
    def _gpus_are_indices(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(i < 0 for i in value):
            raise ValueError(f"takes GPU indices 0 or more, as nvidia-smi numbers them (got {value})")
        return value

    @field_validator("sglang_python")
    @classmethod
    def _interpreter_is_a_path(cls, value: str) -> str:
        if not value.strip() or value.startswith("-"):
            raise ValueError(f"must be the path of the python that has SGLang, e.g. /opt/sglang-env/bin/python "
                             f"(got {value!r})")
        return value

    @field_validator("allow_flags", mode="before")
    @classmethod
    def _trust_flags(cls, raw: Any) -> Any:
        return check_allowed_flags(_split_words(raw))

    @field_validator("concurrency", mode="before")
    @classmethod
    def _integer_list(cls, raw: Any) -> Any:
        words = _split_words(raw)
        bad = [w for w in words if isinstance(w, str) and not w.strip().isdigit()] if isinstance(words, list) else []
        if bad:
            raise ValueError(f"takes concurrency levels (whole numbers of 1 or more) separated by commas, e.g. 1,8,16; "
                             f"{_entry(bad[0])} is not one")
        return words

    @field_validator("server_args", "server_env")
    @classmethod
    def _reviewed_server_additions(cls, value: list[str], info: ValidationInfo) -> list[str]:
        # The trust review and the entries' shape, before any run exists (the plan parses them again).
        parse_server_args(value, info.data.get("allow_flags") or []) if info.field_name == "server_args" \
            else parse_server_env(value)
        return value

    @field_validator("ssh_options", "mtp_steps", mode="before")
    @classmethod
    def _word_list(cls, raw: Any) -> Any:
        return _split_words(raw)

    @field_validator("shapes", mode="before")
    @classmethod
    def _shape_list(cls, raw: Any) -> Any:
        # One N,K per entry: a string from the environment or the file holds entries separated by spaces.
        shapes = raw.split() if isinstance(raw, str) else raw
        bad = [s for s in shapes or [] if isinstance(s, str) and not _SHAPE.match(s.strip())]
        if bad:
            raise ValueError(f"takes one GEMM shape N,K (two whole numbers of 1 or more) per entry, e.g. "
                             f"--shapes 4096,7168 --shapes 7168,2048; {_entry(bad[0])} is not one")
        return shapes

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only the values given: the layers are merged by load_settings, which knows their origins.
        return (init_settings,)

    @property
    def config_file(self) -> ConfigFile | None:
        return self._config_file

    def config_note(self) -> str:
        """The line every campaign and sync prints: which settings file was read."""
        if self._config_file is None:
            return f"config file: none (defaults, {ENV_PREFIX}* environment and options)"
        return f"config file: {self._config_file.describe()}"

    def measure_params(self) -> dict[str, int]:
        """The benchmark sizes the user chose; the scripts' own defaults fill in the rest."""
        chosen = {"input_len": self.input_len, "output_len": self.output_len,
                  "prompts_per_concurrency": self.prompts_per_concurrency, "min_prompts": self.min_prompts}
        return {k: v for k, v in chosen.items() if v is not None}

    def remember_secrets(self) -> None:
        """Register this run's secrets (the API key, URL credentials) so nothing written carries them."""
        remember(self.llm_api_key.get_secret_value() if self.llm_api_key else None)
        remember(url_password(self.llm_base_url))

    def public_dump(self) -> dict[str, Any]:
        """The settings as config.json records them: every known secret and credential redacted."""
        self.remember_secrets()
        data = self.model_dump(mode="json")
        if self.llm_api_key is not None:
            data["llm_api_key"] = "[redacted]"
        return redact(data)


def parse_gpu_list(raw: str) -> list[int]:
    """``0,1,2`` (or ``0 1 2``) as GPU indices; empty entries, signs and words are refused."""
    entries = [e.strip() for e in raw.split(",")] if "," in raw else raw.split()
    bad = [e for e in entries if not e.isdigit()]
    if bad or not entries:
        what = (f"{raw!r} has an empty entry" if "" in bad else f"{_entry(bad[0])} is not one" if bad
                else "it was given empty")
        raise ValueError(f"takes GPU indices (0 or more, as nvidia-smi numbers them) separated by commas, "
                         f"e.g. 0,1,2,3; {what}")
    return [int(e) for e in entries]


def _entry(word: str) -> str:
    """A bad list entry, named once: ``'-1'``, or ``'a'``."""
    return repr(word.strip())


class _Environment(EnvSettingsSource):
    """``DSV4_*`` variables from a given mapping (the process environment unless a test passes one)."""

    def __init__(self, environ: Mapping[str, str]):
        self._environ = environ
        super().__init__(Settings, env_prefix=ENV_PREFIX)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items()}


def _openai_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The openai client's own variables, below the DSV4_* names."""
    names = {"llm_base_url": "OPENAI_BASE_URL", "llm_api_key": "OPENAI_API_KEY"}
    return {field: environ[name] for field, name in names.items() if environ.get(name)}


def _from_file(path: Path, how: str) -> tuple[dict[str, Any], ConfigFile | None]:
    if how == WORKING_FOLDER and not os.path.lexists(path):
        return {}, None
    if how != WORKING_FOLDER and not path.exists():
        raise SettingsError(f"config file {path} does not exist; pass an existing TOML file to --config "
                            f"(or unset {CONFIG_ENV})")
    try:
        found = read_config(path, how)
        if how == WORKING_FOLDER:
            check_allowed(found)
        return parsed(found), found
    except ConfigFileError as err:
        raise SettingsError(str(err)) from None


def load_settings(cli: dict[str, Any] | None = None, cwd: Path | None = None,
                  environ: Mapping[str, str] | None = None, config: str | None = None,
                  flags: Mapping[str, str] | None = None) -> Settings:
    """Merge the layers, lowest first; a CLI value of None means 'not given' and does not override.

    ``config`` is the ``--config`` value; ``flags`` maps a setting to the option that sets it, so
    that an error about a command-line value names the option the user typed.
    """
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    path, how = config_path(config, cwd, environ)
    from_file, found = _from_file(path, how)
    cli_values = {k: v for k, v in (cli or {}).items() if v is not None}
    layers: list[tuple[str, dict[str, Any]]] = [
        (str(path), from_file),
        ("environment (OPENAI_*)", _openai_environment(environ)),
        ("environment", _environment_values(environ)),
        ("command line", InitSettingsSource(Settings, init_kwargs=cli_values)()),
    ]
    merged = {key: value for _where, layer in layers for key, value in layer.items()}
    origin = {key: where for where, layer in layers for key in layer}
    try:
        settings = Settings(**merged)
    except ValidationError as err:
        raise SettingsError(_explain(err, origin, flags or {})) from None
    settings._config_file = found
    return settings


def _environment_values(environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        return _Environment(environ)()
    except PydanticSettingsError as err:  # e.g. a value that does not decode
        raise SettingsError(f"environment: {err}") from None


def _explain(err: ValidationError, origin: dict[str, str], flags: Mapping[str, str]) -> str:
    first = err.errors()[0]
    key = str(first["loc"][0]) if first["loc"] else "?"
    where = origin.get(key, "defaults")
    hint = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
    if where == "command line" and key in flags:
        return f"{flags[key]} {hint}"
    if where == "environment":
        return f"setting {key!r} from environment ({ENV_PREFIX}{key.upper()}): {hint}"
    return f"setting {key!r} from {where}: {hint}"
