"""The command-line options that set campaign settings, as one table.

Each ``SettingOption`` names the ``Settings`` field it sets (``agent/config.py``), its flag, a
metavar, a help line and a help panel. ``with_options`` adds them to a command's signature, so a
command receives them as ``**settings`` keyword arguments named after the fields and hands them to
``load_settings`` as the command-line layer. The table is kept here (not derived at run time from
the pydantic model) so that ``--help`` does not import pydantic; ``tests/test_cli_conventions.py``
checks that every option names a real field.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Annotated, Any, Callable, Optional

import typer

MODEL, SGLANG, GPUS, TUNING, BENCH, LLM, RUN = (
    "Model", "SGLang", "GPUs and where jobs run", "Kernel tuning", "Benchmark", "LLM planning", "Run")


@dataclass(frozen=True)
class SettingOption:
    field: str                 # the Settings field this option sets
    flag: str                  # e.g. "--model-path"; a bool may be "--x/--no-x"
    help: str
    panel: str
    metavar: str | None = None  # None for flags
    kind: type = str           # str, int, float, bool, or list (repeatable)
    min: float | None = None
    aliases: tuple[str, ...] = ()  # more names for the same option, e.g. --dry-run for --plan-only

    def parameter(self) -> inspect.Parameter:
        annotation: Any = list[str] if self.kind is list else self.kind
        option = typer.Option(self.flag, *self.aliases, help=self.help, metavar=self.metavar, rich_help_panel=self.panel,
                              min=self.min, show_default=False)
        return inspect.Parameter(self.field, inspect.Parameter.KEYWORD_ONLY, default=None,
                                 annotation=Annotated[Optional[annotation], option])

    def helped(self, text: str) -> "SettingOption":
        return replace(self, help=text)


O = SettingOption
OPTIONS: dict[str, SettingOption] = {o.field: o for o in [
    O("model", "--model", "Model id or path [deepseek-ai/DeepSeek-V4-Flash].", MODEL, "ID"),
    O("model_path", "--model-path", "Local checkpoint folder (config.json, tokenizer).", MODEL, "DIR"),
    O("arch", "--arch", "Model architecture, e.g. DeepseekV4ForCausalLM, for the MTP evidence when --model-path "
      "has no config.json [read from it, else matched from the model id].", MODEL, "CLASS"),
    O("tokenizer", "--tokenizer", "Local tokenizer for offline benchmarks.", MODEL, "DIR"),
    O("sglang_src", "--sglang", "SGLang checkout or package folder [found automatically].", SGLANG, "DIR"),
    O("sglang_python", "--sglang-python", "Interpreter with SGLang installed [python3].", SGLANG, "PYTHON"),
    O("pull", "--pull", "Fast-forward the SGLang checkout first.", SGLANG, kind=bool),
    O("remote", "--remote", "Remote to pull from [origin].", SGLANG, "NAME"),
    O("branch", "--branch", "Branch to pull [main].", SGLANG, "NAME"),
    O("allow_dirty", "--allow-dirty", "Pull into a dirty checkout when upstream touches none of its changes.",
      SGLANG, kind=bool),
    O("gpus", "--gpus", "GPU indices to use, e.g. 0,1,2,3 [every free GPU found]; with no GPU here, the "
      "target's.", GPUS, "LIST"),
    O("target_gpus", "--target-gpus", "Planning with no GPU here: how many GPUs the target has [8, said so].", GPUS,
      "N", int, 1),
    O("allow_busy_gpus", "--allow-busy-gpus", "Use GPUs that other processes are using (they are named).", GPUS,
      kind=bool),
    O("tp", "--tp", "Tensor-parallel size [number of GPUs]; must fit the GPUs.", GPUS, "N", int, 1),
    O("executor", "--executor", "Where GPU jobs run: local | ssh://user@host[:port] | slurm[:partition] [local].",
      GPUS, "WHERE"),
    O("ssh_options", "--ssh-option", "Extra ssh argument for ssh:// executors, e.g. --ssh-option=-F "
      "--ssh-option=cfg (repeat).", GPUS, "ARG", list),
    O("nvidia_smi", "--nvidia-smi", "nvidia-smi on the GPU host [nvidia-smi].", GPUS, "PATH"),
    O("nodes", "--nodes", "Nodes one server spans; >1 also writes multi-node serve scripts [1].", GPUS, "N", int),
    O("dist_init_addr", "--dist-init-addr", "Address of node 0 for the per-node scripts (with --nodes).", GPUS,
      "HOST:PORT"),
    O("shapes", "--shapes", "FP8 GEMM shape to tune, e.g. 4096,7168 (repeat).", TUNING, "N,K", list),
    O("retune", "--retune", "Tune shapes that already have configs.", TUNING, kind=bool),
    O("force_tune", "--force-tune", "Tune even where the evidence says the Triton FP8 path is not used.", TUNING,
      kind=bool),
    O("concurrency", "--concurrency", "Benchmark concurrency levels [1,8,16].", BENCH, "LIST"),
    O("input_len", "--input-len", "Benchmark prompt tokens [1024].", BENCH, "TOKENS", int),
    O("output_len", "--output-len", "Benchmark output tokens [1024].", BENCH, "TOKENS", int),
    O("prompts_per_concurrency", "--prompts-per-concurrency", "Prompts per point = this x concurrency, at least "
      "--min-prompts [8].", BENCH, "N", int),
    O("min_prompts", "--min-prompts", "Fewest prompts of any point, so low concurrency still sees enough requests "
      "[16].", BENCH, "N", int),
    O("repeats", "--repeats", "Runs of every point on the same server; median and spread [3].", BENCH, "K", int, 1),
    O("mtp_variants", "--mtp-variants", "Measure at most N MTP settings from the evidence, recommended first [all].",
      BENCH, "N", int, 1),
    O("mtp_steps", "--mtp-steps", "More MTP settings to measure: steps (1,2,3) or steps/topk/draft (3/1/4), "
      "checked against the hooks' rules.", BENCH, "LIST"),
    O("accuracy_questions", "--accuracy-questions", "GSM8K questions per variant for the accuracy gate [50].", BENCH,
      "N", int, 1),
    O("accuracy_data", "--accuracy-data", "GSM8K test.jsonl (few_shot_gsm8k --data-path); offline without it the "
      "gate is skipped.", BENCH, "FILE"),
    O("accuracy_tolerance", "--accuracy-tolerance", "Largest accuracy drop allowed, e.g. 0.02 [the baseline's 95% "
      "interval].", BENCH, "FRACTION", float, 0),
    O("max_ttft_ms", "--max-ttft-ms", "SLO: highest TTFT in ms at --slo-percentile.", BENCH, "MS", float, 0),
    O("max_tpot_ms", "--max-tpot-ms", "SLO: highest TPOT in ms at --slo-percentile.", BENCH, "MS", float, 0),
    O("slo_percentile", "--slo-percentile", "Percentile the SLOs apply to: p50 p90 p95 p99 [p99].", BENCH, "P"),
    O("llm_base_url", "--llm-base-url", "OpenAI-compatible endpoint; unset = the deterministic playbook.", LLM,
      "URL"),
    O("llm_model", "--llm-model", "Model name at the LLM endpoint [the one it serves].", LLM, "NAME"),
    O("accept_unsupported_flags", "--accept-unsupported-flags", "Write LLM-proposed flags that have no cited "
      "evidence.", LLM, kind=bool),
    O("max_llm_steps", "--max-llm-steps", "LLM budget: model turns [30].", LLM, "N", int),
    O("llm_max_tokens", "--llm-max-tokens", "LLM budget: total tokens [400000].", LLM, "N", int),
    O("llm_max_seconds", "--llm-max-seconds", "LLM budget: seconds in model calls and tools [900].", LLM,
      "SECONDS", float),
    O("llm_stream", "--llm-stream/--no-llm-stream", "Stream the LLM's answers [no-llm-stream].", LLM, kind=bool),
    O("allow_flags", "--allow-flag", "Let a recipe or the model add this trust-widening server flag, e.g. "
      "--allow-flag=--trust-remote-code (repeat).", SGLANG, "FLAG", list),
    O("server_args", "--server-arg", "Flags added to every serve script, e.g. --server-arg '--mem-fraction-static "
      "0.8' (repeat); trust-widening ones need --allow-flag.", SGLANG, "'FLAG [VALUE]'", list),
    O("server_env", "--server-env", "Environment of every serve script, e.g. --server-env NCCL_DEBUG=INFO (repeat).",
      SGLANG, "NAME=VALUE", list),
    O("plan_only", "--plan-only", "Write every script, start no GPU job; `dsv4-agent resume RUN` runs them.", RUN,
      kind=bool, aliases=("--dry-run",)),
    O("runs_dir", "--runs-dir", "Folder holding run folders [runs].", RUN, "DIR"),
]}


def pick(*fields: str, **helps: str) -> list[SettingOption]:
    """Some of the table's options, optionally with another help line (``field=text``)."""
    return [OPTIONS[f].helped(helps[f]) if f in helps else OPTIONS[f] for f in fields]


def flag_names(specs: list[SettingOption]) -> dict[str, str]:
    """Setting -> the option that sets it, for error messages."""
    return {s.field: s.flag.split("/")[0] for s in specs}


def with_options(specs: list[SettingOption]) -> Callable[[Callable], Callable]:
    """Give ``fn(…, **settings)`` one keyword option per spec, after its own parameters."""
    def decorate(fn: Callable) -> Callable:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
        fn.__signature__ = inspect.Signature([*own, *(s.parameter() for s in specs)])
        fn.setting_options = specs
        return fn
    return decorate
