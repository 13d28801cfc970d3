"""``dsv4-agent "GOAL"`` (alias ``run``) and ``resume``."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from agent.commands.base import JsonFlag, RunRef, RunsDir, end_when_written, fail
from agent.commands.options import OPTIONS, flag_names, pick, with_options

RUN_OPTIONS = list(OPTIONS.values())
RESUME_OPTIONS = pick(
    "sglang_python", "sglang_src", "model_path", "tokenizer", "executor", "ssh_options", "nvidia_smi", "gpus",
    "allow_busy_gpus", "max_llm_steps", "llm_max_tokens", "llm_max_seconds",
    sglang_python="Interpreter with SGLang on this host.", sglang_src="SGLang checkout on this host.",
    model_path="Local checkpoint folder on this host.", tokenizer="Local tokenizer on this host.",
    executor="Where to run the GPU steps now (a run whose jobs already ran keeps its executor).",
    ssh_options="ssh argument for an ssh:// executor (repeat); the run folder's own are never used.",
    gpus="GPU indices to use on this host.",
    max_llm_steps="LLM budget in model turns, counting the recorded ones (after budget_exhausted).")

Goal = Annotated[str, typer.Argument(metavar="GOAL", help="What to do, in words: tune kernels, enable MTP, "
                                                           "benchmark, sync.")]
ConfigFile = Annotated[Optional[str], typer.Option(
    "--config", metavar="FILE", rich_help_panel="Run",
    help="Settings file (TOML) [./dsv4-agent.toml if present; or $DSV4_CONFIG].")]

RUN_HELP = (
    "Run a campaign for GOAL, such as \"enable MTP and tune kernels\".\n\n"
    "Settings precedence: these options > DSV4_* environment > the config file > defaults. "
    "Output goes to runs/<UTC time>-<slug>/: config.json, plan.md, trace.jsonl, scripts, jobs/, "
    "report, and result.json (written last). Exit 0 finished or planned, 1 failed, 2 bad input, "
    "3 LLM budget exhausted, 130 interrupted.")


@with_options(RUN_OPTIONS)
def run(goal: Goal, config: ConfigFile = None, as_json: JsonFlag = False, **settings) -> None:
    from agent.preload import preload_graph_libraries

    preload_graph_libraries()
    from agent.campaign import CampaignError, start
    from agent.config import SettingsError, load_settings
    from agent.live import LiveView
    from agent.playbook import GoalError, plan_goal
    from agent.runfolder import RunFolderError

    view = LiveView(to_stderr=as_json)
    try:
        chosen = load_settings(settings, config=config, flags=flag_names(RUN_OPTIONS))
        if not chosen.llm_base_url:
            plan_goal(goal, pull=chosen.pull)  # refuse an unusable goal before writing anything
        if chosen.mtp_steps:
            _check_mtp_steps(chosen)  # a setting a hook forbids is refused before a run folder exists
        code = start(chosen, goal, view)
    except (SettingsError, GoalError, CampaignError, RunFolderError) as err:
        fail(str(err))
    _print_result(view, as_json)
    end_when_written(code)


RESUME_HELP = (
    "Continue a run that crashed, was interrupted, or was only planned (no GPU where it was made). "
    "Finished steps are reused, running jobs re-attached, nothing launched twice.")


RetryFailed = Annotated[bool, typer.Option(
    "--retry-failed", rich_help_panel="Run",
    help="Also run again the jobs that were stopped or failed every attempt they were allowed.")]


@with_options(RESUME_OPTIONS)
def resume(run: RunRef, runs_dir: RunsDir = "runs", retry_failed: RetryFailed = False, as_json: JsonFlag = False,
           **overrides) -> None:
    from agent.preload import preload_graph_libraries

    preload_graph_libraries()
    from agent.campaign import CampaignError, resume as resume_run
    from agent.live import LiveView

    view = LiveView(to_stderr=as_json)
    try:
        code = resume_run(run, runs_dir, overrides, view, retry_failed=retry_failed)
    except CampaignError as err:
        fail(str(err))
    _print_result(view, as_json)
    end_when_written(code)


def _check_mtp_steps(settings) -> None:
    """Each --mtp-steps entry against the rules of the tree this run will read (the plan checks the same)."""
    from pathlib import Path

    from agent.steps.measure_plan import hook_rules
    from tools.base import ToolError
    from tools.measure.variants import evidence_choices, parse_user_setting, user_choices
    from tools.mtp.infer import InferMtpArgs, infer_mtp

    try:
        for entry in settings.mtp_steps:
            parse_user_setting(entry)
        answer = infer_mtp(InferMtpArgs(sglang=settings.sglang_src, model=settings.model,
                                        model_path=settings.model_path, sglang_python=settings.sglang_python,
                                        version=settings.sglang_version))
        rules = hook_rules(Path(answer.source.root))
        known, _notes = evidence_choices(answer, rules)
        user_choices(settings.mtp_steps, answer, rules, known)
    except ToolError as err:
        fail(str(err))


def _print_result(view, as_json: bool) -> None:
    """With --json, stdout holds only the run's result.json (docs/cli-json.schema.json, `$defs/result`)."""
    if as_json and view.run_path is not None:
        from agent.commands.base import print_json
        from agent.runfolder import RunFolder

        print_json(RunFolder(view.run_path).result)
