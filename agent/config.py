"""One settings model, one precedence rule: CLI > ./dsv4-agent.toml > DSV4_* environment > defaults.

``load_settings(cli_values)`` is the only way settings are built. Secrets (the LLM key) are
held as ``SecretStr`` and never written: ``public_dump`` redacts them for ``config.json``.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from tools.scripts.models import ConcurrencyLevels

CONFIG_FILE = "dsv4-agent.toml"
ENV_PREFIX = "DSV4_"


class SettingsError(Exception):
    """Bad configuration; the message names the setting, where it came from, and the fix."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field("deepseek-ai/DeepSeek-V4-Flash", description="HF id or local path of the served model")
    model_path: str | None = Field(None, description="Local checkpoint folder (config.json, tokenizer)")
    sglang_src: str | None = Field(None, description="SGLang checkout or package dir; else auto-resolved")
    sglang_version: str = Field("0.5.23", description="PyPI version used when the source must be downloaded")
    sglang_python: str = Field("python3", description="Interpreter that has SGLang installed")
    gpus: list[int] | None = Field(None, description="GPU indices to use; None = every GPU found")
    runs_dir: str = Field("runs", description="Where run folders are created")
    executor: str = Field("local", description="local | ssh://user@host[:port] | slurm[:partition]")
    ssh_options: list[str] = Field(default_factory=list, description="Extra ssh arguments, e.g. -F ssh_config")
    nvidia_smi: str = Field("nvidia-smi", description="nvidia-smi on the GPU host (the SSH executor runs it there)")
    nodes: int = Field(1, ge=1, le=512, description="Nodes one server spans; >1 also writes multi-node scripts")
    dist_init_addr: str | None = Field(None, description="HOST:PORT of node 0 for multi-node serve scripts")
    pull: bool = Field(False, description="Fast-forward the SGLang checkout before the campaign")
    remote: str = "origin"
    branch: str = "main"
    allow_dirty: bool = False
    shapes: list[str] = Field(default_factory=list, description="FP8 GEMM shapes 'N,K' to tune")
    retune: bool = Field(False, description="Tune shapes even when configs exist")
    force_tune: bool = Field(False, description="Tune even when evidence says Triton is not used")
    tp: int | None = Field(None, description="Tensor parallel size; default = number of GPUs")
    concurrency: ConcurrencyLevels = Field(default_factory=lambda: [1, 8, 16])
    tokenizer: str | None = Field(None, description="Local tokenizer path for offline benchmarks")
    input_len: int | None = Field(None, gt=0, description="Benchmark prompt length in tokens [1024]")
    output_len: int | None = Field(None, gt=0, description="Benchmark output length in tokens [1024]")
    prompts_per_concurrency: int | None = Field(None, gt=0, description="Prompts per point = this x concurrency [8]")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint; unset = playbook")
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    accept_unsupported_flags: bool = Field(False, description="Write LLM-proposed flags that lack evidence")
    max_llm_steps: int = Field(30, gt=0, description="LLM budget: model turns before the run ends budget_exhausted")
    llm_max_tokens: int = Field(400_000, gt=0, description="LLM budget: total tokens (prompt + completion)")
    llm_max_seconds: float = Field(900.0, gt=0, description="LLM budget: seconds spent in model calls and tools")
    llm_stream: bool = Field(False, description="Stream the LLM's answers (Server-Sent Events)")

    def measure_params(self) -> dict[str, int]:
        """The benchmark sizes the user chose; the scripts' own defaults fill in the rest."""
        chosen = {"input_len": self.input_len, "output_len": self.output_len,
                  "prompts_per_concurrency": self.prompts_per_concurrency}
        return {k: v for k, v in chosen.items() if v is not None}

    def public_dump(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if self.llm_api_key is not None:
            data["llm_api_key"] = "[redacted]"
        return data


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        annotation = str(field.annotation)
        if "list" in annotation:
            values[name] = [p for p in raw.replace(",", " ").split() if p]
        else:
            values[name] = raw
    # The openai convention is honoured too, below DSV4_* names.
    if environ.get("OPENAI_BASE_URL"):
        values.setdefault("llm_base_url", environ["OPENAI_BASE_URL"])
    if environ.get("OPENAI_API_KEY") and "llm_api_key" not in values:
        values["llm_api_key"] = environ["OPENAI_API_KEY"]
    return values


def _from_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SettingsError(f"{path}: not valid TOML ({err}); fix or remove the file") from None
    return {k.replace("-", "_"): v for k, v in data.items()}


def load_settings(cli: dict[str, Any] | None = None, cwd: Path | None = None,
                  environ: dict[str, str] | None = None) -> Settings:
    """Merge the layers; a CLI value of None means 'not given' and does not override."""
    environ = dict(os.environ) if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    layers = [("environment", _from_env(environ)), (str(cwd / CONFIG_FILE), _from_file(cwd / CONFIG_FILE)),
              ("command line", {k: v for k, v in (cli or {}).items() if v is not None})]
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for where, layer in layers:
        for key, value in layer.items():
            merged[key] = value
            origin[key] = where
    try:
        return Settings.model_validate(merged)
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        where = origin.get(key, "defaults")
        hint = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"]
        raise SettingsError(f"setting {key!r} from {where}: {hint}") from None
