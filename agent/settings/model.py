"""The settings, as one table: every field carries its default, help, flag, metavar and help group.

Add a setting here, as a field made with ``setting(...)``; the command-line option is built from
the field (``agent/commands/options.py``, through the generated ``option_table.py``), its help
shows the field's default, and the config file and ``DSV4_*`` environment take it by its name.
Where the values come from and in which order: ``agent/settings/layers.py``. ``Settings(...)``
alone reads nothing but its arguments. Secrets (the LLM key) are held as ``SecretStr`` and never
written: ``public_dump`` redacts them for ``config.json``.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, PrivateAttr, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from agent.settings.config_file import ConfigFile
from agent.settings.setting_field import setting
from agent.secrets import redact, remember, url_password
from tools.defaults import ASSUMED_TARGET_GPUS, DEFAULT_MODEL, SGLANG_PYTHON, SGLANG_VERSION
from tools.jobs.executor_spec import ExecutorSetting, ExecutorSpec
from tools.jobs.outages import DEFAULT_OUTAGE_WAIT_S
from tools.measure.search_budget import budget_text
from tools.scripts.models import MAX_CONCURRENCY, ConcurrencyLevels, MeasurePlan
from tools.scripts.trust import check_allowed_flags
from tools.scripts.user_args import parse_server_args, parse_server_env

_SHAPE = re.compile(r"^0*[1-9][0-9]*\s*[,x]\s*0*[1-9][0-9]*$")
ENV_PREFIX = "DSV4_"
# The help's groups, in the order --help shows them
MODEL, SGLANG, GPUS, TUNING, BENCH, LLM, RUN = (
    "Model", "SGLang", "GPUs and where jobs run", "Kernel tuning", "Benchmark", "LLM planning", "Run")
_PLAN = MeasurePlan.model_fields  # the benchmark's own defaults, which the sizes below leave in place


# Upper bounds of the counts: beyond them a value is a typo, and it would start a run that fails later
# (the checkpoint stores 64-bit integers) or plans work that never ends.
MAX_GPUS = 4096
MAX_TOKENS = 1 << 21


class SettingsError(Exception):
    """Bad configuration; the message names the setting, where it came from, and the fix."""


def _split_words(raw: Any) -> Any:
    """Lists may be given as one string, '0,1,2' or '0 1 2' (environment, --gpus)."""
    if isinstance(raw, str):
        return [p for p in raw.replace(",", " ").split() if p]
    return raw


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", env_prefix=ENV_PREFIX, validate_default=False)

    model: str = setting(DEFAULT_MODEL, "Model id or path.", "--model", "ID", MODEL)
    model_path: str | None = setting(None, "Local checkpoint folder (config.json, tokenizer).", "--model-path", "DIR",
                                     MODEL, host_path=2)
    arch: str | None = setting(None, "Model architecture, e.g. DeepseekV4ForCausalLM, where --model-path has no "
                               "config.json naming one (config.json decides).", "--arch", "CLASS", MODEL,
                               shown="read from it, else matched from the model id")
    tokenizer: str | None = setting(None, "Local tokenizer for offline benchmarks.", "--tokenizer", "DIR", MODEL,
                                    host_path=3)
    sglang_src: str | None = setting(None, "SGLang checkout or package folder.", "--sglang", "DIR", SGLANG,
                                     shown="found automatically", user_only="code to run", host_path=1)
    sglang_python: str = setting(SGLANG_PYTHON, "Interpreter with SGLang installed.", "--sglang-python", "PYTHON",
                                 SGLANG, user_only="a program")
    sglang_version: str = setting(SGLANG_VERSION, "SGLang wheel version to download when no source is found.",
                                  "--sglang-version", "VERSION", SGLANG)
    pull: bool = setting(False, "Fast-forward the SGLang checkout first.", "--pull", None, SGLANG)
    remote: str = setting("origin", "Remote to pull from.", "--remote", "NAME", SGLANG)
    branch: str = setting("main", "Branch to pull.", "--branch", "NAME", SGLANG)
    allow_dirty: bool = setting(False, "Pull into a dirty checkout when upstream touches none of its changes.",
                                "--allow-dirty", None, SGLANG)
    gpus: Annotated[list[int] | None, NoDecode] = setting(
        None, "GPU indices to use, e.g. 0,1,2,3; with no GPU here, the target's.", "--gpus", "LIST", GPUS,
        shown="every free GPU found")
    target_gpus: int | None = setting(None, "Planning with no GPU here: how many GPUs the target has.", "--target-gpus",
                                      "N", GPUS, shown=f"{ASSUMED_TARGET_GPUS}, said so", ge=1, le=512)
    allow_busy_gpus: bool = setting(False, "Use GPUs that other processes are using (they are named).",
                                    "--allow-busy-gpus", None, GPUS)
    tp: int | None = setting(None, "Tensor-parallel size; must fit the GPUs.", "--tp", "N", GPUS,
                             shown="number of GPUs", ge=1, le=MAX_GPUS)
    executor: Annotated[ExecutorSetting, NoDecode] = setting(
        ExecutorSpec(kind="local"), "Where GPU jobs run: local | ssh://user@host[:port] | slurm[:partition].",
        "--executor", "WHERE", GPUS, user_only="a host")
    ssh_options: Annotated[list[str], NoDecode] = setting(
        None, "Extra ssh argument for ssh:// executors, e.g. --ssh-option=-F --ssh-option=cfg (repeat).",
        "--ssh-option", "ARG", GPUS, repeat=True, factory=list, user_only="ssh options")
    nvidia_smi: str = setting("nvidia-smi", "nvidia-smi on the GPU host.", "--nvidia-smi", "PATH", GPUS,
                              user_only="a program")
    outage_wait_s: float = setting(
        DEFAULT_OUTAGE_WAIT_S, "Seconds a status call waits out a slurmctld or SSH host that "
        "stopped answering (retrying) before the run fails.", "--outage-wait", "SECONDS", GPUS, ge=0, le=86_400)
    nodes: int = setting(1, "Nodes one server spans; >1 also writes multi-node serve scripts.", "--nodes", "N", GPUS,
                         ge=1, le=512)
    dist_init_addr: str | None = setting(None, "Address of node 0 for the per-node scripts (with --nodes).",
                                         "--dist-init-addr", "HOST:PORT", GPUS)
    shapes: Annotated[list[str], NoDecode] = setting(None, "FP8 GEMM shape to tune, e.g. 4096,7168 (repeat).",
                                                     "--shapes", "N,K", TUNING, repeat=True, factory=list)
    retune: bool = setting(False, "Tune shapes that already have configs.", "--retune", None, TUNING)
    force_tune: bool = setting(False, "Tune even where the evidence says the Triton FP8 path is not used.",
                               "--force-tune", None, TUNING)
    concurrency: Annotated[ConcurrencyLevels, NoDecode] = setting(None, "Benchmark concurrency levels.", "--concurrency",
                                                                  "LIST", BENCH, factory=_PLAN["concurrency"].default_factory)
    input_len: int | None = setting(None, "Benchmark prompt tokens.", "--input-len", "TOKENS", BENCH,
                                    shown=_PLAN["input_len"].default, gt=0, le=MAX_TOKENS)
    output_len: int | None = setting(None, "Benchmark output tokens.", "--output-len", "TOKENS", BENCH,
                                     shown=_PLAN["output_len"].default, gt=0, le=MAX_TOKENS)
    prompts_per_concurrency: int | None = setting(
        None, "Prompts per point = this x concurrency, at least --min-prompts.", "--prompts-per-concurrency", "N",
        BENCH, shown=_PLAN["prompts_per_concurrency"].default, gt=0, le=10_000)
    min_prompts: int | None = setting(None, "Fewest prompts of any point, so low concurrency still sees enough requests.",
                                      "--min-prompts", "N", BENCH, shown=_PLAN["min_prompts"].default, gt=0, le=1_000_000)
    repeats: int = setting(3, "Runs of every point on the same server; median and spread.", "--repeats", "K", BENCH,
                           ge=1, le=100)
    target_concurrency: int | None = setting(
        None, "The concurrency you will serve at: the verdict deploys the winner there.", "--target-concurrency", "N",
        BENCH, shown="the most levels won", ge=1, le=MAX_CONCURRENCY)
    mtp_variants: int | None = setting(None, "Measure at most N MTP settings from the evidence, recommended first.",
                                       "--mtp-variants", "N", BENCH, shown="all", ge=1, le=1000)
    mtp_steps: Annotated[list[str], NoDecode] = setting(
        None, "More MTP settings to measure: steps (1,2,3) or steps/topk/draft (3/1/4), checked against the hooks' "
        "rules.", "--mtp-steps", "LIST", BENCH, factory=list)
    budget: Annotated[str | None, BeforeValidator(budget_text)] = setting(
        None, "GPU time for a measured search of the fenced space (90m, 2h): successive halving.", "--budget",
        "DURATION", BENCH, shown="none: every setting, every repeat")
    accuracy_questions: int = setting(50, "GSM8K questions per variant for the accuracy gate.", "--accuracy-questions",
                                      "N", BENCH, ge=1, le=100_000)
    accuracy_data: str | None = setting(None, "GSM8K test.jsonl (few_shot_gsm8k --data-path); offline without it the gate "
                                        "is skipped.", "--accuracy-data", "FILE", BENCH, host_path=4)
    accuracy_tolerance: float | None = setting(None, "Largest accuracy drop allowed, e.g. 0.02.", "--accuracy-tolerance",
                                               "FRACTION", BENCH, shown="the baseline's 95% interval", ge=0, le=1)
    max_ttft_ms: float | None = setting(None, "SLO: highest TTFT in ms at --slo-percentile.", "--max-ttft-ms", "MS",
                                        BENCH, gt=0)
    max_tpot_ms: float | None = setting(None, "SLO: highest TPOT in ms at --slo-percentile.", "--max-tpot-ms", "MS",
                                        BENCH, gt=0)
    slo_percentile: Literal["p50", "p90", "p95", "p99"] = setting(
        "p99", "Percentile the SLOs apply to: p50 p90 p95 p99.", "--slo-percentile", "P", BENCH)
    llm_base_url: str | None = setting(None, "OpenAI-compatible endpoint; unset = the deterministic playbook.",
                                       "--llm-base-url", "URL", LLM, user_only="an endpoint")
    llm_model: str | None = setting(None, "Model name at the LLM endpoint.", "--llm-model", "NAME", LLM,
                                    shown="the one it serves")
    llm_api_key: SecretStr | None = setting(
        None, "API key of the LLM endpoint (never written; never on a command line).", user_only="a credential",
        compared=False)  # a secret, never recorded
    accept_unsupported_flags: bool = setting(False, "Write LLM-proposed flags that have no cited evidence.",
                                             "--accept-unsupported-flags", None, LLM)
    max_llm_steps: int = setting(30, "LLM budget: model turns.", "--max-llm-steps", "N", LLM, gt=0, le=10_000)
    llm_max_tokens: int = setting(400_000, "LLM budget: total tokens.", "--llm-max-tokens", "N", LLM, gt=0, le=10**10)
    llm_max_seconds: float = setting(900.0, "LLM budget: seconds in model calls and tools.", "--llm-max-seconds",
                                     "SECONDS", LLM, gt=0, le=10**7)
    llm_stream: bool = setting(False, "Stream the LLM's answers.", "--llm-stream/--no-llm-stream", None, LLM)
    allow_flags: Annotated[list[str], NoDecode] = setting(
        None, "Let a recipe or the model add this trust-widening server flag, e.g. --allow-flag=--trust-remote-code "
        "(repeat).", "--allow-flag", "FLAG", SGLANG, repeat=True, factory=list, user_only="trust-widening flags")
    server_args: Annotated[list[str], NoDecode] = setting(
        None, "Flags added to every serve script, e.g. --server-arg '--mem-fraction-static 0.8' (repeat); "
        "trust-widening ones need --allow-flag.", "--server-arg", "'FLAG [VALUE]'", SGLANG, repeat=True, factory=list)
    server_env: Annotated[list[str], NoDecode] = setting(
        None, "Environment of every serve script, e.g. --server-env NCCL_DEBUG=INFO (repeat).", "--server-env",
        "NAME=VALUE", SGLANG, repeat=True, factory=list, user_only="environment to pass")
    plan_only: bool = setting(False, "Write every script, start no GPU job; `dsv4-agent resume RUN` runs them.",
                              "--plan-only", None, RUN, aliases=("--dry-run",))
    runs_dir: str = setting("runs", "Folder holding run folders.", "--runs-dir", "DIR", RUN, compared=False)
    # The settings file load_settings read (None: none); not a setting, never validated from input.
    _config_file: ConfigFile | None = PrivateAttr(None)

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_list(cls, raw: Any) -> Any:
        return parse_gpu_list(raw) if isinstance(raw, str) else raw

    @field_validator("gpus")
    @classmethod
    def _gpus_are_indices(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(i < 0 or i >= MAX_GPUS for i in value):
            bad = next(i for i in value if i < 0 or i >= MAX_GPUS)
            raise ValueError(f"takes GPU indices 0 to {MAX_GPUS - 1}, as nvidia-smi numbers them (got {bad})")
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

    @field_validator("target_concurrency")
    @classmethod
    def _a_measured_level(cls, value: int | None, info: ValidationInfo) -> int | None:
        levels = info.data.get("concurrency")
        if value is not None and levels and value not in levels:
            raise ValueError(f"{value} is not one of the levels measured (--concurrency {','.join(map(str, levels))}): "
                             "add it to --concurrency, or name one of them")
        return value

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

    @classmethod
    def marked(cls, mark: str) -> dict[str, Any]:
        """Each setting whose field carries ``mark`` (a property ``setting`` takes) and its value, in field order."""
        fields = cls.model_fields.items()
        return {name: f.json_schema_extra[mark] for name, f in fields if f.json_schema_extra.get(mark)}

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
