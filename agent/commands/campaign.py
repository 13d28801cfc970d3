"""``dsv4-agent "GOAL"`` (alias ``run``) and ``resume``."""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Annotated, Optional

from agent.commands.params import Arg, JsonFlag, Opt, RunRef, RunsDir, fail
from agent.commands.shared import end_when_written
from agent.commands.options import OPTIONS, flag_names, pick, with_options

RUN_OPTIONS = list(OPTIONS.values())
RESUME_OPTIONS = pick(
    "sglang_python", "sglang_src", "model_path", "tokenizer", "accuracy_data", "executor", "ssh_options", "nvidia_smi",
    "gpus", "tp", "allow_busy_gpus", "max_llm_steps", "llm_max_tokens", "llm_max_seconds", "llm_base_url",
    "server_env", "allow_flags", "plan_only",
    plan_only="Write the scripts again (from this host's paths) and stop before any GPU job, for review.",
    sglang_python="Interpreter with SGLang on this host.", sglang_src="SGLang checkout on this host.",
    model_path="Local checkpoint folder on this host.", tokenizer="Local tokenizer on this host.",
    accuracy_data="GSM8K test.jsonl on this host.",
    executor="Where to run the GPU steps now (a run whose jobs already ran keeps its executor).",
    ssh_options="ssh argument for an ssh:// executor (repeat); the run folder's own only once allowed.",
    gpus="GPU indices to use on this host: servers, TP and unfinished tuning follow them.",
    tp="Tensor-parallel size of the servers on the GPUs used now [their number].",
    max_llm_steps="LLM budget in model turns, counting the recorded ones (after budget_exhausted).")

Goal = Annotated[str, Arg(metavar="GOAL", help="What to do, in words: tune kernels, enable MTP, "
                                                           "benchmark, sync.")]
ConfigFile = Annotated[Optional[str], Opt(
    "--config", metavar="FILE", rich_help_panel="Run",
    help="Settings file (TOML) [./dsv4-agent.toml if present; or $DSV4_CONFIG].")]



@with_options(RUN_OPTIONS)
def run(goal: Goal, config: ConfigFile = None, as_json: JsonFlag = False, **settings) -> None:
    """Run a campaign for GOAL, such as "enable MTP and tune kernels".

    Settings precedence: these options > DSV4_* environment > the config file > defaults. Output goes to runs/<UTC
    time>-<slug>/: config.json, plan.md, trace.jsonl, scripts, jobs/, report, and result.json (written last). Exit
    0 finished or planned, 1 failed, 2 bad input, 3 LLM budget exhausted, 130 interrupted.
    """
    # LangGraph is not preloaded here: a fresh campaign's first GPU job starts before it is imported
    # (agent/campaign/early_lane.py)
    from agent.campaign.start_resume import CampaignError, start
    from agent.settings.layers import SettingsError, load_settings
    from agent.terminal.live import LiveView
    from agent.campaign.playbook import GoalError, plan_goal
    from agent.run.folder import RunFolderError
    from tools.base import ToolError

    view = LiveView(to_stderr=as_json)
    try:
        chosen = load_settings(settings, config=config, flags=flag_names(RUN_OPTIONS))
        if not chosen.llm_base_url:
            plan_goal(goal, pull=chosen.pull)  # an unusable goal: refused
        # Refused before a run folder exists: an SGLang path that holds none, a malformed --mtp-steps entry.
        # The hooks judge --mtp-steps once the GPUs are checked (agent/campaign/start_resume.py); without it, the evidence
        # is read in the research lane while the GPU jobs run (docs/evidence.md).
        _check_sglang_path(chosen)
        _check_mtp_steps(chosen.mtp_steps)
        if not chosen.llm_base_url:
            _check_mtp_model(chosen, goal)
        code = start(chosen, goal, view)
    except (SettingsError, GoalError, CampaignError, RunFolderError, ToolError) as err:
        fail(str(err))
    _print_result(view, as_json)
    end_when_written(code)




RetryFailed = Annotated[bool, Opt(
    "--retry-failed", rich_help_panel="Run",
    help="Also run again the jobs that were stopped or failed every attempt they were allowed.")]


RebuildCheckpoint = Annotated[bool, Opt(
    "--rebuild-checkpoint", rich_help_panel="Run",
    help="Set a damaged checkpoint aside and re-derive the run's progress from its trace, step outcomes and job "
         "ledgers.")]


AcceptChanges = Annotated[bool, Opt(
    "--accept-changes", rich_help_panel="Run",
    help="Go on although the flags, variants or evidence made on this host differ from the run's (changes.md).")]


@with_options(RESUME_OPTIONS)
def resume(run: RunRef, runs_dir: RunsDir = "runs", retry_failed: RetryFailed = False,
           rebuild_checkpoint: RebuildCheckpoint = False, accept_changes: AcceptChanges = False,
           as_json: JsonFlag = False, **overrides) -> None:
    """Continue a run that crashed, was interrupted, or was only planned (no GPU where it was made). Finished steps
    are reused, running jobs re-attached, nothing launched twice. RUN may be a bundle (`dsv4-agent bundle RUN`
    made elsewhere): it is unpacked into --runs-dir and continued, its trace too; steps made from the planning
    machine's paths (the MTP evidence, the scripts) are made again from the paths given here.
    """
    from agent.campaign.preload import preload_graph_libraries

    preload_graph_libraries()
    from agent.campaign.start_resume import CampaignError, resume as resume_run
    from agent.terminal.live import LiveView

    view = LiveView(to_stderr=as_json)
    unpacked = _unpack(run, runs_dir) if run.endswith(".tar.gz") and Path(run).is_file() else None
    try:
        code = resume_run(str(unpacked[0]) if unpacked else run, runs_dir, overrides, view, retry_failed=retry_failed,
                          rebuild_checkpoint=rebuild_checkpoint, accept_changes=accept_changes)
    except CampaignError as err:
        if unpacked and unpacked[1]:
            shutil.rmtree(unpacked[0])  # refused before any change: leave no run behind that this call unpacked
        fail(str(err))
    _print_result(view, as_json)
    end_when_written(code)


def _unpack(archive: str, runs_dir: str):
    from agent.run.bundle import BundleError, unpack_bundle

    try:
        return unpack_bundle(Path(archive), Path(runs_dir))
    except BundleError as err:
        fail(str(err))


Output = Annotated[Optional[str], Opt("--output", "-o", metavar="FILE",
                                               help="Where to write the bundle: a file, or a folder for <run name>.tar.gz [./<run name>.tar.gz].")]
AccuracyData = Annotated[Optional[str], Opt(
    "--accuracy-data", metavar="URL_OR_FILE",
    help="GSM8K test.jsonl to carry for the accuracy gate: an http(s) URL is fetched now, a file copied "
         "[your accuracy-data setting; never the run's].")]


def bundle(run: RunRef, runs_dir: RunsDir = "runs", output: Output = None, accuracy_data: AccuracyData = None,
           as_json: JsonFlag = False) -> None:
    """Pack a planned run into one .tar.gz (scripts, plan, evidence, trace, checkpoint) for a GPU host that this
    machine cannot reach. There: dsv4-agent resume BUNDLE.tar.gz --sglang-python PATH (and its own --sglang,
    --model-path, --tokenizer); the run goes on where it stopped. A run that has started jobs stays where its jobs
    are. Example: dsv4-agent bundle latest -o /media/usb/plan.tar.gz
    """
    from agent.run.bundle import SUFFIX, BundleError, make_bundle
    from agent.run.bundle_data import BUNDLED_GSM8K, DataError, fetch_accuracy_data, users_source
    from agent.commands.params import print_json
    from agent.settings.model import SettingsError
    from agent.run.folder import RunFolder, RunFolderError
    from agent.terminal.printable import echo

    try:
        folder = RunFolder.find(run, runs_dir)
        source = users_source(accuracy_data)  # the user's, never the run folder's
        data = fetch_accuracy_data(source) if source else None
    except (RunFolderError, SettingsError, DataError) as err:
        fail(str(err))
    target = Path(output) if output else Path(folder.path.name + SUFFIX)
    if target.is_dir() or (output or "").endswith("/"):
        target = target / (folder.path.name + SUFFIX)
    if not target.parent.is_dir():  # never a folder made where a mistyped path points
        fail(f"--output {output}: the folder {target.parent} does not exist; create it, or pass --output FILE "
             "in an existing folder")
    try:
        made = make_bundle(folder, target, {BUNDLED_GSM8K: data.data} if data else None)
    except BundleError as err:
        fail(str(err))
    except OSError as err:
        fail(f"cannot write {target}: {err.strerror}; pass --output FILE in a writable folder")
    then = f"dsv4-agent resume {shlex.quote(target.name)} {_host_options(folder)}".rstrip()
    if as_json:
        carried = {"source": data.source, "questions": data.questions, "file": BUNDLED_GSM8K} if data else None
        print_json({"bundle": str(made.path), "run": made.run, "files": made.files, "bytes": made.bytes,
                    "next": then, "accuracy_data": carried})
        return
    echo(f"wrote {made.path} ({made.files} files, {made.bytes / 1024:.0f} KiB) holding run {made.run}")
    if data:
        echo(f"with GSM8K data for the accuracy gate ({data.questions} questions from {data.source}) as "
             f"{BUNDLED_GSM8K}: resume uses it offline")
    echo(f"copy it to the GPU host, then there: {then}")


def _host_options(folder) -> str:
    """The options that give the GPU host's own paths for the ones this run recorded, and the programs,
    hosts and environment it names that are not the defaults (a run folder never gives them back:
    agent/settings/of_run.py)."""
    from agent.settings.model import Settings
    from agent.settings.of_run import user_only_fields
    from agent.settings.recorded import host_path_options

    settings = (folder.config() or {}).get("settings", {})
    wanted = ["--sglang-python PATH"]
    wanted += [option for field, option in host_path_options(Settings).items()  # the GSM8K data travels in the bundle
               if field != "accuracy_data" and settings.get(field)]
    defaults = Settings().public_dump()
    for name in [n for n in user_only_fields() if n not in ("sglang_python", "sglang_src")]:  # asked for above
        flag, metavar = (Settings.model_fields[name].json_schema_extra[k] for k in ("flag", "metavar"))
        if flag and settings.get(name, defaults[name]) != defaults[name]:
            wanted.append(f"{flag} {metavar}")
    return " ".join(wanted)


def _check_sglang_path(settings) -> None:
    """``--sglang`` must hold SGLang where it is read: here, unless the jobs run over SSH (a path there)."""
    if not settings.sglang_src or settings.executor.kind == "ssh":
        return
    from tools.base import ToolError
    from tools.source.resolve import ResolveSourceArgs, resolve_source

    path = Path(settings.sglang_src).expanduser()
    if not path.exists():
        fail(f"--sglang {settings.sglang_src} does not exist; pass --sglang DIR (an SGLang checkout, or the folder "
             "holding the sglang package), or leave it out to find SGLang automatically")
    try:
        resolve_source(ResolveSourceArgs(path=str(path), sglang_python=settings.sglang_python,
                                         version=settings.sglang_version))
    except ToolError as err:
        fail(f"--sglang {settings.sglang_src}: {err}")


def _check_mtp_model(settings, goal: str) -> None:
    """An MTP goal needs the model's architecture: from --model-path's config.json, --arch, or the model's
    name in the SGLang tree; a model none of them names is refused before a run (no MTP could be planned).
    A config.json is only seen here, not read: preflight reads it once and decides (tools/checkpoint/architecture.py)."""
    from agent.campaign.playbook import plan_goal

    if settings.arch or not any(step.kind == "infer_mtp" for step in plan_goal(goal, pull=settings.pull)[0]):
        return
    from tools.base import ToolError
    from tools.checkpoint.config import config_path
    from tools.checkpoint.architecture import decide_architecture
    from tools.source.resolve import ResolveSourceArgs, resolve_source

    if settings.model_path and config_path(settings.model_path).is_file():
        return
    try:
        info = resolve_source(ResolveSourceArgs(path=settings.sglang_src, sglang_python=settings.sglang_python,
                                                version=settings.sglang_version))
    except ToolError:
        return  # no tree to read here: preflight says so, and the research lane says what it could not find
    if decide_architecture(settings.model, None, None, info.root, info.package_dir).name:
        return
    config = f"--model-path {settings.model_path} has no config.json" if settings.model_path else "no --model-path"
    fail(f"the goal asks for MTP, and --model {settings.model} names no model class of SGLang {info.version} at "
         f"{info.root} ({config}); pass --arch CLASS, or --model-path DIR with the checkpoint's config.json, or "
         "a goal without MTP")


def _check_mtp_steps(entries: list[str]) -> None:
    if entries:
        from tools.mtp.variants import parse_user_setting  # the evidence engine: only when asked

        for entry in entries:
            parse_user_setting(entry)


def _print_result(view, as_json: bool) -> None:
    """With --json, stdout holds only the run's result.json (docs/cli-json.schema.json, `$defs/result`)."""
    if as_json and view.run_path is not None:
        from agent.commands.params import print_json
        from agent.run.folder import RunFolder

        print_json(RunFolder(view.run_path).result)
