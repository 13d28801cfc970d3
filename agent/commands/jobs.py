"""``jobs``: list a run's jobs (answered without typer too: agent/commands/quick.py), print a log tail, stop
jobs, let resume retry one. Contacting a host or controller is imported when it is done: a look at a
local ledger needs none of it."""
from __future__ import annotations

from typing import Annotated, Optional

from agent.commands.params import JsonFlag, Opt, RunRef, RunsDir, fail, find_run, print_json
from agent.run.folder import RunFolder
from agent.run.status import job_data, jobs_data, render_jobs
from agent.settings.recorded import CampaignError
from agent.terminal.printable import echo
from tools.base import ToolError
from tools.jobs.ledger.listing import local_jobs

STOP_ALL = "all"

Logs = Annotated[Optional[str], Opt("--logs", metavar="JOB", help="Print this job's log tail.")]
Stop = Annotated[Optional[str], Opt("--stop", metavar="JOB|all",
                                             help="Stop this job, or every job of the run that still runs.")]
Lines = Annotated[int, Opt("--lines", metavar="N", min=1, max=1_000_000,
                                    help="Log lines to print with --logs.")]
Retry = Annotated[Optional[str], Opt("--retry", metavar="JOB",
                                              help="Let the next resume run this ended, unsuccessful job again.")]
SshOption = Annotated[Optional[list[str]], Opt(
    "--ssh-option", metavar="ARG", help="ssh argument for a run on an ssh:// executor (repeat); a run folder's "
                                        "own only once allowed (runs you made are).")]
ExecutorOption = Annotated[Optional[str], Opt(
    "--executor", metavar="WHERE", help="Where the run's jobs ran (local | ssh://user@host[:port] | slurm[:partition]); "
                                        "a run folder's own only once allowed (runs you made are).")]


def jobs(run: RunRef, logs: Logs = None, stop: Stop = None, retry: Retry = None, lines: Lines = 40,
         runs_dir: RunsDir = "runs", executor_given: ExecutorOption = None, ssh_option: SshOption = None,
         as_json: JsonFlag = False) -> None:
    """List a run's jobs; --logs JOB prints a log tail; --stop JOB (or all) stops jobs; --retry JOB
    lets `resume` run a stopped or failed job again as a new attempt.

    Only jobs in this run's ledger can be stopped, and only through the process identity it recorded.
    """
    folder = find_run(run, runs_dir)
    try:
        if not (logs or stop or retry) and executor_given is None and _local_ledger(folder):
            found = local_jobs(folder.jobs_dir)  # what make_executor's LocalExecutor would list, without it
        else:
            executor = _executor(folder, executor_given, ssh_option)
            if logs:
                executor.poll(logs)
                text = executor.read_log(logs, max_chars=200_000)
                echo("\n".join(text.splitlines()[-lines:]))
                return
            if stop:
                _stop(executor, stop, as_json)
                return
            if retry:
                _retry(executor, retry, folder, as_json)
                return
            found = executor.jobs()
    except (ToolError, CampaignError) as err:
        fail(str(err))
    if as_json:
        print_json(jobs_data(found))
    else:
        echo(render_jobs(found))


def _local_ledger(folder: RunFolder) -> bool:
    """Whether the run's jobs are LocalExecutor's and no other executor has claimed the ledger, so that
    ``make_executor`` would answer with a LocalExecutor and change nothing (tools/jobs/factory.py)."""
    executor = ((folder.config() or {}).get("settings") or {}).get("executor", "local")
    return isinstance(executor, str) and executor.strip() == "local" and not (folder.jobs_dir / "executor.json").exists()


def _executor(folder: RunFolder, executor_given: str | None, ssh_option: list[str] | None):
    """The run's executor, reached by resume's rule for the folder's host and options (agent/settings/run_reach.py)."""
    from agent.settings.run_reach import reach_of_run
    from agent.terminal.printable import outage_wait
    from tools.jobs.factory import make_executor

    where, options = reach_of_run(folder.path, executor_given, ssh_option)
    return make_executor(where, folder.jobs_dir, ssh_options=options, outage=outage_wait())


def _stop(executor, stop: str, as_json: bool) -> None:
    """Stop one job or every running one; each that could not be stopped is named, and the command
    then fails (every other one is still stopped)."""
    # (key, shown when stopped): a lost job (its wrapper died without a word) is looked at too, as processes
    # may be left in its group, but named only if they cannot be stopped
    found = [(j.key, not j.done) for j in executor.jobs() if not j.done or j.status == "lost"] \
        if stop == STOP_ALL else [(stop, True)]
    states, refused = [], []
    for key, shown in found:
        try:
            state = executor.stop(key)
        except ToolError as err:
            if stop != STOP_ALL:
                raise
            refused.append(str(err))
            continue
        if shown:
            states.append(state)
    if as_json:
        print_json([job_data(s) for s in states])
    elif not states and not refused:
        echo("no running jobs to stop")
    for s in states if not as_json else []:
        echo(f"{s.key}: {s.status} {s.reason}".rstrip())
    if refused:
        fail("; ".join(refused))


def _retry(executor, key: str, folder, as_json: bool) -> None:
    from tools.jobs.attempts import request_retry  # pydantic: not for a look at a run

    state = request_retry(executor, key)
    if as_json:
        print_json([job_data(state)])
    else:
        print(f"{key}: {state.status}; retry requested: `dsv4-agent resume {folder.path}` runs it again as a new "
              "attempt", flush=True)
