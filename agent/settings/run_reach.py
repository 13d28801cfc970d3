"""Where ``jobs RUN`` and ``tuning uninstall RUN`` reach a recorded run's jobs: the folder's executor
and ssh options, only under ``resume``'s rule (agent/settings/of_run.py): equal to the user's own now,
or the folder allowed. A run whose jobs ran here (``local``) contacts nobody and asks for nothing.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.settings.of_run import known_settings, recorded_settings, refuse_strangers, user_now, user_only_fields, validated
from tools.base import ToolError
from tools.jobs.executor_spec import ExecutorSpec, ExecutorSpecError

REACH = ("executor", "ssh_options")  # the host first, then the options for it (as resume judges them)


def reach_of_run(run: Path, executor: str | None, ssh_options: list[str] | None,
                 environ: Mapping[str, str] | None = None) -> tuple[ExecutorSpec, list[str]]:
    """(the executor, its ssh options) for reaching ``run``'s jobs; ``executor``/``ssh_options``: what
    this command was given (None: not given). Raises CampaignError naming the setting and its
    option, ToolError for an executor no text names."""
    raw = (run / "config.json").read_bytes()
    known, _dropped = known_settings(recorded_settings(run, raw))
    given = {k: v for k, v in {"executor": executor, "ssh_options": ssh_options}.items() if v is not None}
    try:  # whatever the folder holds, as text: the error names it
        where = ExecutorSpec.parse(str(known.get("executor", "local")))
    except ExecutorSpecError as err:
        raise ToolError(str(err)) from None
    chosen = validated(run, {"executor": where, "ssh_options": known.get("ssh_options") or [], **given})
    if chosen.executor.kind == "local":
        return chosen.executor, []
    what, ssh = user_only_fields(), chosen.executor.kind == "ssh"  # Slurm takes no ssh options
    refuse_strangers(run, raw, chosen, user_now(given, environ), given,
                     {name: what[name] for name in (REACH if ssh else REACH[:1])})
    return chosen.executor, list(chosen.ssh_options) if ssh else []
