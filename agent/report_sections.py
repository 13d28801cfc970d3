"""The campaign's own report sections beyond the benchmark tables: tuning proof and timeline.

Every path that rebuilds a report (the campaign's report node, ``dsv4-agent report``,
``dsv4-agent replay --timeline``) passes these to ``build_report`` so the page is the same
whichever built it.
"""
from __future__ import annotations

from pathlib import Path

from agent.replay.timeline import Timeline
from agent.replay.timeline_view import report_section, timeline_for_run, write_png

Section = tuple[str, str, str]


def run_timeline(run_dir: Path) -> tuple[Timeline, Path] | None:
    """The run's timeline (from its good trace events) and its PNG, or None without a trace."""
    if not (run_dir / "trace.jsonl").exists():
        return None
    timeline, stop = timeline_for_run(run_dir)
    if stop:
        timeline.notes.append(f"trace read up to a bad line: {stop}")
    return timeline, write_png(timeline, run_dir / "timeline.png")


def campaign_sections(run_dir: Path | str, timeline: tuple[Timeline, Path] | None = None) -> list[Section]:
    from tools.tuning.prove import proof_section

    run_dir = Path(run_dir)
    sections: list[Section] = []
    proof = proof_section(run_dir)
    if proof is not None:
        sections.append(proof)
    timeline = timeline or run_timeline(run_dir)
    if timeline is not None:
        sections.append(report_section(*timeline))
    return sections
