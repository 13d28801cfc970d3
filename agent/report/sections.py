"""The campaign's own report sections beyond the benchmark tables: the LLM's flag review and
research notes (LLM mode only), the tuning proof, and the timeline.

Every path that rebuilds a report (the campaign's report node, ``dsv4-agent report``,
``dsv4-agent replay --timeline``) passes these to ``build_report`` so the page is the same
whichever built it.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from agent.replay.timeline import Timeline
from agent.report.timeline_view import report_section, timeline_for_run, write_png

Section = tuple[str, str, str]


def run_timeline(run_dir: Path) -> tuple[Timeline, Path] | None:
    """The run's timeline (from its good trace events) and its PNG, or None without a trace."""
    if not (run_dir / "trace.jsonl").exists():
        return None
    timeline, stop = timeline_for_run(run_dir)
    if stop:
        timeline.notes.append(f"trace read up to a bad line: {stop}")
    return timeline, write_png(timeline, run_dir / "timeline.png")


def flag_review_section(run_dir: Path) -> Section | None:
    """Every server flag an LLM proposed (planner and research), with the guard's verdict."""
    verdicts = []
    for source, path in (("planner", run_dir / "flag_review.json"), ("research", run_dir / "llm" / "research.json")):
        if path.exists():
            data = json.loads(path.read_text())
            review = data.get("flag_review", data) if source == "research" else data
            verdicts += [(source, v) for v in review.get("verdicts", [])]
    if not verdicts:
        return None
    rows = [(src, v["flag"], v.get("value", ""), v["verdict"], v.get("origin") or "", "; ".join(v.get("violates", []))
             or v.get("reason", "")) for src, v in verdicts]
    head = ("from", "flag", "value", "verdict", "evidence", "why")
    md = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                   + ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows])
    body = ("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
            + "</table>")
    note = "Rejected flags were not written into any script (see `--accept-unsupported-flags`)."
    return "Flags proposed by the LLM", f"{md}\n\n{note}", f"{body}<p>{html.escape(note)}</p>"


def research_notes_section(run_dir: Path) -> Section | None:
    path = run_dir / "research_notes.md"
    if not path.exists():
        return None
    text = path.read_text().split("\n", 1)[-1].strip()  # the file's own title is the section's
    return "LLM research notes", text, f"<pre>{html.escape(text)}</pre>"


def campaign_sections(run_dir: Path | str, timeline: tuple[Timeline, Path] | None = None) -> list[Section]:
    from tools.tuning.prove import proof_section

    run_dir = Path(run_dir)
    sections: list[Section] = [s for s in (flag_review_section(run_dir), research_notes_section(run_dir)) if s]
    proof = proof_section(run_dir)
    if proof is not None:
        sections.append(proof)
    timeline = timeline or run_timeline(run_dir)
    if timeline is not None:
        sections.append(report_section(*timeline))
    return sections
