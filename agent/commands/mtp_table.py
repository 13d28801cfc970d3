"""Rich tables for ``dsv4-agent mtp`` (the readable, cited form of the answer)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from agent.terminal.printable import text
from tools.mtp.answer import MtpAnswer
from tools.mtp.bearing import folded_line, split_constraints

MAX_ROWS = 25


def print_answer(answer: MtpAnswer, console: Console | None = None) -> None:
    console = console or Console(soft_wrap=True)
    src = answer.source
    console.print(text(answer.model, "bold") + text(f"  architecture: {answer.architecture or 'unknown'}"))
    console.print(text(f"source: {src.kind} {src.root} (version {src.version or '?'}, commit {src.commit or '-'})"))
    for line in answer.checkpoint.lines() if answer.checkpoint else []:
        console.print(text(line))
    rec = answer.recommended
    if rec is None:
        console.print("[yellow]No recommendation[/yellow]: no evidence in the tree for this model.")
    else:
        table = Table(title="Recommended", show_lines=False)
        for column in ("flag", "value", "cited"):
            table.add_column(column, overflow="fold")
        for name, value in rec.flags.items():
            table.add_row(text(name), text(value or "(switch)"), text(rec.flag_origins.get(name, rec.origin).cite()))
        for name, value in rec.env.items():
            where = rec.env_origins[name].cite() if name in rec.env_origins else rec.origin.cite()
            table.add_row(text(f"env {name}"), text(value), text(f"{where} ({rec.env_evidence.get(name, 'recipe env')})"))
        for name, variable in rec.needs.items():
            where = rec.needs_origins[name].cite() if name in rec.needs_origins else rec.origin.cite()
            table.add_row(text(name), text(f"(you give it: ${variable})"), text(where))
        console.print(table)
        for line in rec.rationale:
            console.print(text(f"  - {line}"))
        for d in rec.dropped:
            console.print(text(f"  left out: {d.kind} {d.name}{f' ({d.origin.cite()})' if d.origin else ''}: {d.reason}"))
    if answer.candidates:
        table = Table(title=f"Candidates ({len(answer.candidates)})")
        for column in ("model", "hardware", "written at the cited line", "as SGLang resolves it", "cited"):
            table.add_column(column, overflow="fold")
        for cand in answer.candidates[:MAX_ROWS]:
            hardware = cand.hardware or "-"
            if cand.condition:
                hardware += f" ({cand.condition})"
            written = " ".join(f"{k} {v}".strip() for k, v in cand.written_flags.items())
            written += "".join(f" {k} `{v}`" for k, v in cand.unread.items() if k.startswith("--speculative-"))
            written += "".join(f" {k} ${v}" for k, v in cand.needs.items())
            resolved = " ".join(f"{k} {v}".strip() for k, v in cand.flags.items())
            table.add_row(text(cand.model), text(hardware), text(written),
                          text(resolved if resolved != written else "(same)"), text(cand.origin.cite()))
        console.print(table)
    bearing, folded = split_constraints(answer)
    table = Table(title=f"Constraints that bear on this setting ({len(bearing)} of {len(answer.constraints)})")
    table.add_column("rule", overflow="fold")
    table.add_column("cited", overflow="fold")
    for constraint in bearing[:MAX_ROWS]:
        table.add_row(text(constraint.rule), text(constraint.origin.cite()))
    console.print(table)
    if len(bearing) > MAX_ROWS:
        console.print(f"[cut: {len(bearing) - MAX_ROWS} more constraints; limit {MAX_ROWS} rows; "
                      "use --json for all]", markup=False)
    if folded:
        console.print(text(folded_line(folded)))
    if answer.verification is not None:
        print_verification(answer, console)
    for unknown in answer.unknowns:
        console.print(text(f"unknown: {unknown}"))


def print_verification(answer: MtpAnswer, console: Console) -> None:
    """Static reading and SGLang's own resolution side by side."""
    v = answer.verification
    assert v is not None
    if v.static is not None and v.resolved is not None:
        table = Table(title="Static reading vs SGLang's resolution")
        for column in ("setting", "static", "resolved by SGLang", ""):
            table.add_column(column, overflow="fold")
        for name in type(v.resolved).model_fields:
            ours, theirs = getattr(v.static, name), getattr(v.resolved, name)
            differs = any(m.startswith(f"--{name.replace('_', '-')}:") for m in v.mismatches)
            table.add_row(text(name), text("-" if ours is None else ours), text("-" if theirs is None else theirs),
                          "MISMATCH" if differs else "")
        console.print(table)
    console.print(text(v.line()))
