"""``sync.md``: the sync result written for a reader, capped, saying what was cut.

Commit subjects and paths are upstream text: they are shown in code spans, never interpreted.
"""
from __future__ import annotations

from tools.base import cap_lines
from tools.sync.upstream import SyncResult

MAX_COMMITS = 30
MAX_FILES_PER_COMMIT = 5
MAX_IMPACT = 60


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("\n", " ") + "`"


def _capped(lines: list[str], limit: int, what: str) -> list[str]:
    capped = cap_lines(lines, limit, 20_000, what=what)
    out = capped.text.splitlines()
    return out + ([f"- {capped.note}"] if capped.truncated else [])


def render_markdown(result: SyncResult) -> str:
    pulled = result.pull
    lines = [f"# Sync: {pulled.checkout}", "", result.summary, "",
             f"- branch `{pulled.branch}` ← `{pulled.upstream}`; status **{pulled.status}**"
             + ("; shallow clone" if pulled.shallow else ""),
             f"- from `{result.reported_from[:12]}` to `{pulled.new_head[:12]}`"]
    if pulled.dirty_kept:
        lines.append(f"- local changes kept untouched (--allow-dirty): {len(pulled.dirty_kept)} file(s)")

    lines += ["", f"## New commits ({len(pulled.commits)})", ""]
    entries = []
    for commit in pulled.commits:
        shown = ", ".join(_code(f) for f in commit.files[:MAX_FILES_PER_COMMIT])
        more = commit.files_total - min(len(commit.files), MAX_FILES_PER_COMMIT)
        entries.append(f"- `{commit.short}` {_code(commit.subject)}: {shown or 'no files'}"
                       + (f" (+{more} more)" if more > 0 else ""))
    lines += _capped(entries, MAX_COMMITS, "commits") or ["- none"]

    deps = result.dependencies
    lines += ["", f"## Dependency changes ({len(deps.changes)})", ""]
    for change in deps.changes:
        mark = " **(kernel-critical)**" if change.key else ""
        lines.append(f"- {change.package}{mark}: {change.change} in `{change.file}` [{change.group}]: "
                     f"{_code(change.old or '—')} → {_code(change.new or '—')}")
    if not deps.changes:
        lines.append("- none")
    if deps.reinstall:
        lines += ["", "Reinstall in the SGLang environment:", "", "```sh", deps.reinstall, "```"]
    if deps.extras_note:
        lines += ["", deps.extras_note]
    lines += [f"- could not read {u}" for u in deps.unreadable]

    lines += ["", f"## Changed files that matter for the target ({len(result.impact)})", "",
              f"Matched name fragments: {', '.join(result.terms) or 'none'}", ""]
    entries = [f"- [{f.category}] `{f.path}`: {f.why}" + (f" ({', '.join(f.commits)})" if f.commits else "")
               for f in result.impact]
    lines += _capped(entries, MAX_IMPACT, "files") or ["- none"]

    lines += ["", "## Recommendation", ""]
    for label, run in (("before", result.evidence_before), ("after", result.evidence_after)):
        lines.append(f"- evidence {label}: {run.status}" + (f" — {run.source}" if run.source else "")
                     + (f" ({run.reason})" if run.reason else ""))
    diff = result.recommendation
    lines.append(f"- diff: **{diff.status}**" + (f" — {diff.note}" if diff.note else ""))
    if diff.recommended_before and not diff.recommended_after:
        lines.append("- the new tree supports **no** recommendation any more (see the constraints and unknowns)")
    elif diff.recommended_after and not diff.recommended_before and diff.status == "changed":
        lines.append("- the new tree supports a recommendation where the old one had none")
    for kind, changes in (("flag", diff.flags), ("env", diff.env)):
        for c in changes:
            lines.append(f"- {kind} {_code(c.name)} {c.change}: {_code(c.old or '—')} → {_code(c.new or '—')}"
                         + (f" [{c.cite}]" if c.cite else ""))
    for c in diff.constraints:
        lines.append(f"- constraint {c.change}: {_code(c.rule)}" + (f" [{c.cite}]" if c.cite else ""))
    lines += [f"- new unknown: {_code(u)}" for u in diff.unknowns_added]
    lines += [f"- resolved unknown: {_code(u)}" for u in diff.unknowns_removed]
    return "\n".join(lines) + "\n"
