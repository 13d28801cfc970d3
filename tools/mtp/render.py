"""Readable renderings of an MTP answer: a markdown evidence table (run folders) and rich tables (CLI)."""
from __future__ import annotations

from tools.markdown import Markdown, markdown_table, md_code
from tools.mtp.answer import MtpAnswer
from tools.mtp.bearing import folded_line, split_constraints


def evidence_markdown(answer: MtpAnswer, max_constraints: int = 40) -> str:
    src = answer.source
    out = [f"# Speculative decoding evidence for {answer.model}", "",
           f"- architecture: {answer.architecture or 'unknown'}"
           + (f" ({answer.architecture_decision.how()})" if answer.architecture_decision else ""),
           f"- source: {src.kind} at {src.root} (version {src.version or '?'}, commit {src.commit or '-'})", ""]
    overruled = answer.architecture_decision.disagreement() if answer.architecture_decision else None
    out[-1:-1] = [f"- note: {overruled}"] if overruled else []
    if answer.checkpoint is not None:
        out += ["## The checkpoint in hand", "", *[f"- {line}" for line in answer.checkpoint.lines()], ""]
    rec = answer.recommended
    out += ["## Recommended", ""]
    if rec is None:
        out += ["No recommendation: the tree holds no evidence for this model.", ""]
    else:
        rows = [[md_code(name), md_code(value or "(switch)"), rec.flag_origins.get(name, rec.origin).cite()]
                for name, value in rec.flags.items()]
        for name, value in rec.env.items():
            where = rec.env_origins[name].cite() if name in rec.env_origins else rec.origin.cite()
            rows.append([Markdown(f"env {md_code(name)}"), md_code(value),
                         f"{where} ({rec.env_evidence.get(name, 'recipe env')})"])
        out += [markdown_table(["flag", "value", "cited"], rows), "", "Why:", *[f"- {line}" for line in rec.rationale], ""]
        if rec.dropped:
            out += ["Left out of the recommendation:", ""]
            out += [f"- {d.kind} `{d.name}`"
                    f"{f' ({d.origin.cite()})' if d.origin else ''}: {d.reason}" for d in rec.dropped]
            out.append("")
    if answer.verification is not None:
        out += ["## Verified by SGLang", "", answer.verification.line(), ""]
    out += ["## Candidates (recipes found)", ""]
    if not answer.candidates:
        out.append("None.")
    for cand in answer.candidates:
        flags = " ".join(f"{k} {v}".strip() for k, v in cand.flags.items())
        out.append(f"- {cand.model} on {cand.hardware or 'unspecified hardware'}: `{flags}` ({cand.origin.cite()})")
    bearing, folded = split_constraints(answer)
    shown = bearing[:max_constraints]
    out += ["", f"## Constraints that bear on this setting ({len(bearing)} of {len(answer.constraints)})", ""]
    out += [f"- {c.rule} ({c.origin.cite()})" for c in shown]
    if len(bearing) > len(shown):
        out.append(f"- [cut: {len(bearing) - len(shown)} more; limit {max_constraints}; see mtp.json]")
    if folded:
        out.append(f"- {folded_line(folded).replace('--json lists', 'mtp.json lists')}")
    if answer.unknowns:
        out += ["", "## Unknowns", "", *[f"- {u}" for u in answer.unknowns]]
    return "\n".join(out) + "\n"
