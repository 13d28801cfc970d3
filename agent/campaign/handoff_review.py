"""The hand-off gate: a resume that makes the MTP evidence and the scripts again from another host's
paths (a bundle, another ``--sglang``) holds the GPU jobs until a person has seen what changed.

What is compared is what the GPU jobs will do, not where its files are: each variant's flags and
environment with the evidence each cites (``path:line`` in the SGLang tree), the variants measured,
and the SGLang source the evidence was read from. Paths to the interpreter, checkpoint and tokenizer
differ from host to host by design and are left out. A held attempt that found changes leaves them in
``changes.md`` and ``changes.json`` (pending) until ``resume --accept-changes``.
"""
from __future__ import annotations

import json
import shlex

from agent.run.run_files import MEASURE_PLAN, RunFiles, read_run_json

from agent.exit_codes import ExitCode

PENDING = "changes.json"
SHOWN = "changes.md"


def review_view(run: RunFiles) -> dict[str, str]:
    """What the run's GPU jobs will do, one line per item, keyed for a diff."""
    view: dict[str, str] = {}
    plan = run.json_object(MEASURE_PLAN) or {}
    for variant in plan.get("variants") or []:
        name = variant.get("name", "?")
        view[f"variant {name}"] = "measured"
        for flag in variant.get("flags") or []:
            cited = f" ({flag['source']})" if flag.get("source") else ""
            view[f"variant {name}: {flag.get('flag')}"] = f"{flag.get('value')}{cited}"
        for env in variant.get("env") or []:
            shown = env if isinstance(env, str) else json.dumps(env, sort_keys=True)
            view[f"variant {name}: env {shown}"] = "set"
    answer = run.mtp_answer()
    if answer is not None:
        source = answer.source
        view["evidence: SGLang source"] = f"{source.kind} version {source.version} commit {source.commit}"
    return view


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per difference: added, removed or changed items, in order."""
    lines = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if was is None:
            lines.append(f"+ {key}: {now}")
        elif now is None:
            lines.append(f"- {key}: {was}")
        else:
            lines.append(f"~ {key}: {was} -> {now}")
    return lines


def held_changes(rt, reviewed: dict[str, str]) -> bool:
    """After a held attempt: whether what the jobs will do changed from ``reviewed``; if so the changes
    are shown and left for review."""
    lines = changes(reviewed, review_view(rt.run))
    if not lines:
        return False
    hold(rt.run, lines)
    rt.say("[control] what the GPU jobs will do changed on this host:")
    for line in lines:
        rt.say(f"  {line}")
    rt.say(f"[control] {stop_line(rt.run, lines)}")
    return True


def after_review(rt, reviewed: dict[str, str], code: int, plan_only: bool, go_on) -> int:
    """A held attempt ended with ``code``: stop with the changes (``ExitCode.FAILED``: refused until they are
    accepted), or, with none, ``go_on()`` (a resume that goes on at once) unless ``--plan-only`` was asked."""
    if code != 0 or held_changes(rt, reviewed):
        return code or ExitCode.FAILED
    if plan_only:
        return code
    rt.say("[control] nothing the jobs will do changed on this host: going on")
    return go_on()


def review_gate(run, settings, accept_changes: bool) -> str | None:
    """The refusal of a resume while changes await review (None: go on); ``--accept-changes`` lifts the
    gate, ``--plan-only`` writes again and stops."""
    if accept_changes:
        accept(run)  # lifted whatever the pending file holds: a damaged one too
        return None
    waiting = pending(run)
    if waiting and not settings.plan_only:
        return stop_line(run, waiting)
    return None


def hold(run, lines: list[str]) -> None:
    """Leave the changes for review: ``changes.md`` for a person, ``changes.json`` as the pending gate."""
    run.write_text(SHOWN, "# What changed on this host\n\nThe MTP evidence and the scripts were made again from "
                   "this host's paths. Before any GPU job runs, review:\n\n```\n" + "\n".join(lines) + "\n```\n\n"
                   f"Then `dsv4-agent resume {run.path} --accept-changes`.\n")
    run.write_json(PENDING, {"changes": lines})


def pending(run) -> list[str] | None:
    """The changes a held attempt left for review, or None."""
    path = run.path / PENDING
    if not path.is_file() or path.is_symlink():
        return None
    data = read_run_json(path, f"review {run.path / SHOWN}, then `dsv4-agent resume {shlex.quote(str(run.path))} "
                                "--accept-changes`") or {}
    return [str(line) for line in data.get("changes") or []] or None


def accept(run) -> None:
    """The person accepted the changes: the gate is lifted (changes.md stays, as the record)."""
    (run.path / PENDING).unlink(missing_ok=True)


def stop_line(run, lines: list[str]) -> str:
    return (f"resume stopped before any GPU job: {len(lines)} change(s) in what the jobs will do on this host "
            f"(flags, variants, evidence; {run.path / SHOWN}); review them, then `dsv4-agent resume {run.path} "
            "--accept-changes` (or --plan-only to write the scripts again and stop)")
