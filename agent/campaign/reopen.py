"""Opening a run again for ``resume``: find and lock it, read its trace, write the result a crash lost,
and the settings in force now (the recorded ones, the secrets the environment holds again, what
this resume changes). Each refusal is a ``CampaignError`` with the fix, and leaves the run unlocked.
"""
from __future__ import annotations

import shlex

from agent.settings.model import Settings
from agent.settings.recorded import CampaignError
from agent.run.bundle_data import bundled_data
from agent.settings.of_run import settings_of_run
from agent.run.folder import RunFolder, RunFolderError
from agent.run.trace import TraceError, read_trace


def locked_run(ref: str, runs_dir: str) -> tuple[RunFolder, dict | None, list[dict]]:
    """The run to resume, locked, with its result (None: none yet) and its trace's good events."""
    try:
        run = RunFolder.find(ref, runs_dir)
    except RunFolderError as err:
        raise CampaignError(str(err)) from None
    try:
        result = run.result
    except RunFolderError as err:
        raise CampaignError(f"cannot resume {run.path.name}: {err}") from None
    if link := run.placed_link():  # resume writes the trace, the result, scripts: never through a link
        raise CampaignError(f"cannot resume {run.path.name}: {link}")
    if result is not None and result.get("status") == "finished":
        raise CampaignError(f"run {run.path.name} already finished; start a new run "
                            f"or inspect it with `dsv4-agent status {shlex.quote(str(run.path))}`")
    try:
        run.lock()
    except RunFolderError as err:
        raise CampaignError(str(err)) from None
    if copied := _copy_of_a_live_run(run):
        run.unlock()
        raise CampaignError(f"cannot resume {run.path.name}: it is a copy of a run whose jobs still run ({copied}); "
                            "resume that run, or resume this copy once they have ended")
    try:
        events = read_trace(run.trace_path).events if run.trace_path.exists() else []
    except TraceError as err:
        run.unlock()
        raise CampaignError(f"cannot resume {run.path.name}: {err}") from None
    return run, result, events


def _copy_of_a_live_run(run: RunFolder) -> str | None:
    """The job folder a running job of this run's ledgers was started for, when that is another run's
    (a ``cp -r`` of a live run folder): resuming the copy would run its jobs a second time."""
    from tools.jobs import job_folder
    from tools.jobs.ledger.files import ledger_keys

    for key in ledger_keys(run.jobs_dir):
        copied = job_folder.snapshot(str(run.jobs_dir / key)).get("copied_from")
        if copied:
            return copied
    return None


def resume_settings(run: RunFolder, overrides: dict) -> Settings:
    """The recorded settings as this user may take them back (agent/settings/of_run.py), with what this
    resume changes."""
    try:  # a bundle's GSM8K copy, where the user gives no data now (agent/run/bundle_data.py)
        return settings_of_run(run.path, bundled_data(run.path, overrides), "continue").settings
    except CampaignError:
        run.unlock()
        raise


def changed_settings(settings: Settings, recorded: dict) -> list[str]:
    """The settings in force now that differ from the run's recorded ones."""
    return sorted(k for k, v in settings.public_dump().items() if recorded["settings"].get(k) != v)


def complete_finish(run: RunFolder, finished: dict, recorded: dict) -> dict:
    """The attempt ended (its run_finished is in the trace) but the agent died before result.json:
    write the result it was writing, so that resume treats the run as ended, as a replay will.
    A finished run then stays finished; others resume as a new attempt."""
    status = finished["status"]
    run.write_result(status, finished.get("summary", ""),
                     **run.result_fields(status, bool(recorded["settings"].get("plan_only"))))
    if status == "finished":
        run.unlock()
        raise CampaignError(f"run {run.path.name} already finished (its result.json, lost in a crash, is written "
                            f"again); start a new run or inspect it with `dsv4-agent status {shlex.quote(str(run.path))}`")
    return run.result


def planned_target_here(settings: Settings, executor, resumed_with: dict) -> Settings:
    """A run planned where there was no GPU, for ``--target-gpus N``, resumed where jobs find GPUs: it uses
    them (N of them, or those --gpus names now); another count is refused, naming the option that resolves it."""
    from tools.gpu_choice import GpuRequestError

    wanted = settings.target_gpus
    if wanted is None or resumed_with.get("target_gpus") is not None:
        return settings
    found = executor.detect_gpus()
    if not found.gpus:
        return settings
    if resumed_with.get("gpus") is None and settings.gpus is None and len(found.gpus) != wanted:
        have = ", ".join(g.label() for g in found.gpus)
        pick = ",".join(str(g.index) for g in found.gpus[:wanted])
        raise GpuRequestError(f"the run was planned for {wanted} GPUs (--target-gpus {wanted}), and {len(found.gpus)} "
                              f"are here ({have}); resume with --gpus naming the GPUs to use, e.g. --gpus {pick}")
    return settings.model_copy(update={"target_gpus": None})


def gpus_now_differ(run: RunFolder, checked) -> str | None:
    """How the GPUs chosen now (and their TP) differ from what the run's last preflight found, or None."""
    before = run.preflight() if checked is not None else None  # a damaged one is named, not taken for none
    if before is None:
        return None
    try:
        was = ([g["index"] for g in before.get("gpus") or []], (before.get("gpu_plan") or {}).get("tp"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    now = ([g.index for g in checked.gpus], checked.plan.tp)
    if was == now:
        return None

    def shown(gpus: list[int], tp: int | None) -> str:
        return f"{'GPUs ' + ','.join(map(str, gpus)) if gpus else 'no GPU'} with TP {tp}"

    return f"{shown(*was)} then, {shown(*now)} now"


def say_how_it_resumes(rt, changed: list[str], redone: list[str], damaged: str | None,
                       regpu: str | None) -> None:
    """The lines that open a resumed attempt: what is made again, what the trace lost, what changed."""
    dropped = rt.trace.dropped
    rt.say(f"[control] resuming {rt.run.path}")
    if redone:
        rt.say(f"[control] running again with this host's paths ({', '.join(changed)} changed): {', '.join(redone)}")
    for problem in ([f"cut off what the crash left at the end of the trace: {dropped.describe()}"] if dropped else []) \
            + [f"the trace has a sequence gap: {g.describe()}" for g in rt.trace.gaps]:
        rt.say(f"[control] note: {problem}")
    if damaged:
        rt.say("[control] the damaged checkpoint was set aside: the run's progress is re-derived from its step "
               "outcomes and job ledgers (finished steps reused, running jobs re-attached)")
    if regpu:
        rt.say(f"[control] the GPUs differ from the last attempt's ({regpu}): planning again on them; finished "
               "steps and tuned units are kept, unfinished tuning is handed to these GPUs")
