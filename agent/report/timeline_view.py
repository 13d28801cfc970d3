"""Shows a ``Timeline``: in the terminal (rich), as ``timeline.png`` (matplotlib Agg Gantt chart),
and as a ``(title, markdown, html)`` section for ``agent.report.build.build_report``.

The PNG carries the figures it shows in its ``dsv4-timeline`` text chunk (JSON), so a reader or a
test can check the drawn numbers against the ones computed from the events.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

from agent.run.run_files import RunFiles
from agent.report.blocks import Image, Items, Section
from agent.report.timeline import Bar, Timeline

BAR_WIDTH = 40
MAX_ROWS_LISTED = 5
PNG_META_KEY = "dsv4-timeline"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def figures(tl: Timeline) -> dict:
    """The numbers the views show, rounded as shown."""
    return {"overlap_pct": None if tl.overlap_pct is None else round(tl.overlap_pct, 1),
            "gpu_idle_pct": None if tl.gpu_idle_pct is None else round(tl.gpu_idle_pct, 1),
            "span_s": round(tl.span, 3), "gpus": tl.gpus, "basis": tl.basis,
            "critical_path": [[n, round(s, 3)] for n, s in tl.critical_path]}


def summary_lines(tl: Timeline) -> list[str]:
    path = " → ".join(f"{n} {s:.2f}s" for n, s in tl.critical_path) or "no graph nodes recorded"
    lines = [f"run span {tl.span:.2f}s; GPUs {', '.join(map(str, tl.gpus)) or 'none'}",
             f"research under GPU work: {_pct(tl.overlap_pct)} (GPU work = {tl.basis})",
             f"GPU idle: {_pct(tl.gpu_idle_pct)} of GPU-seconds",
             f"critical path: {path}"]
    if tl.slack:
        lines.append("slack: " + ", ".join(f"{n} waited {s:.2f}s" for n, s in tl.slack))
    slow = tl.slowest(MAX_ROWS_LISTED)
    if slow:
        lines.append("slowest: " + ", ".join(f"{b.label} ({b.lane}) {b.seconds:.2f}s" for b in slow))
    return lines + [f"note: {n}" for n in tl.notes]


def _row(bars: list[Bar], span: float, width: int = BAR_WIDTH) -> str:
    cells = [" "] * width
    for bar in bars:
        lo = int(bar.start / span * width) if span > 0 else 0
        hi = max(lo + 1, int(bar.end / span * width + 0.999)) if span > 0 else 1
        for i in range(lo, min(hi, width)):
            cells[i] = "█"
    return "".join(cells)


def render_terminal(tl: Timeline, width: int = 120) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"timeline (0 → {tl.span:.2f}s)", show_lines=False)
    for name in ("lane", "activity", "busy s"):
        table.add_column(name, justify="right" if name == "busy s" else "left", no_wrap=True)
    table.add_column("items", overflow="fold")  # every bar named (the picture labels only those with room)
    for lane in tl.lanes():
        bars = [b for b in tl.bars if b.lane == lane]
        labels = ", ".join(dict.fromkeys(b.label for b in bars))
        busy = sum(b.seconds for b in bars)
        table.add_row(lane, _row(bars, tl.span), f"{busy:.2f}", labels)
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    console.print(table)
    for line in summary_lines(tl):
        console.print(line, markup=False, highlight=False)
    return console.file.getvalue()


def write_png(tl: Timeline, path: Path | str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    lanes = tl.lanes()
    fig = Figure(figsize=(10, 1.2 + 0.45 * max(1, len(lanes))))
    ax = fig.add_subplot()
    colors = {"failed": "#d62728", "running at end": "#ff7f0e"}
    span = max(tl.span, 1e-3)
    labelled: list[str] = []
    for row, lane in enumerate(lanes):
        bars = sorted((b for b in tl.bars if b.lane == lane), key=lambda b: b.start)
        spans = [(b.start, max(b.seconds, span / 500)) for b in bars]
        shade = [colors.get(b.status, "#1f77b4" if not lane.startswith("node") else "#9aa7b8") for b in bars]
        edges = [1.0 if width > span / 100 else 0.0 for _, width in spans]  # bars that touch stay apart
        ax.broken_barh(spans, (row - 0.35, 0.7), facecolors=shade, edgecolors="white", linewidths=edges)
        labelled += _label_bars(ax, bars, row, span)
    ax.set_yticks(range(len(lanes)), labels=lanes)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since run start")
    ax.set_xlim(0, span)
    ax.set_title(f"research under GPU work {_pct(tl.overlap_pct)} · GPU idle {_pct(tl.gpu_idle_pct)}", y=1.0, pad=6)
    _fixed_margins(fig, lanes)
    path = Path(path)
    shown = {**figures(tl), "drawn": [b.label for b in tl.bars], "labelled": labelled}
    fig.savefig(path, format="png", dpi=100, metadata={PNG_META_KEY: json.dumps(shown)},
                pil_kwargs={"compress_level": 1})  # zlib's fastest: the report waits on this figure
    return path


def _fixed_margins(fig, lanes: list[str]) -> None:
    """Margins from the lane names' length, the tick labels and the title (10 pt), in pixels: laying the
    figure out by measuring its text (tight_layout) drew it twice, after the last GPU job."""
    width_px, height_px = fig.get_size_inches() * 100
    char_px = 0.6 * 10 * 100 / 72
    left = (max((len(lane) for lane in lanes), default=4) * char_px + 18) / width_px
    fig.subplots_adjust(left=left, right=1 - 14 / width_px, bottom=56 / height_px, top=1 - 32 / height_px)


# The axes span about 8 of the figure's 10 inches at 100 dpi; a label's characters are ~0.6 em wide.
_AXES_PX, _LABEL_PT = 800, 7
_CHAR_PX = 0.6 * _LABEL_PT * 100 / 72


def _label_bars(ax, bars: list[Bar], row: int, span: float) -> list[str]:
    """Write each bar's label in the bar, or beside it (after, else before) when the bar is too
    short and the lane is free there; a label that fits nowhere is left out (the terminal view
    lists every bar). Returns the labels drawn."""
    drawn: list[str] = []
    free_from = 0.0  # where the lane is free again: the end of the bars so far and of their labels
    for i, bar in enumerate(bars):
        width = len(bar.label) * _CHAR_PX * span / _AXES_PX * 1.1  # the label's width in seconds, a margin in
        next_start = bars[i + 1].start if i + 1 < len(bars) else span
        place = None
        if bar.seconds >= width and bar.start >= free_from:
            place = (bar.start + bar.seconds / 2, "center", "white", bar.end)
        elif bar.end + width <= next_start and bar.end >= free_from:
            place = (bar.end + width * 0.05, "left", "#1d2330", bar.end + width)
        elif bar.start - width >= free_from:
            place = (bar.start - width * 0.05, "right", "#1d2330", bar.end)
        if place is not None:
            x, align, colour, free_from = place
            ax.text(x, row, bar.label, ha=align, va="center", fontsize=_LABEL_PT, color=colour, clip_on=True)
            drawn.append(bar.label)
        free_from = max(free_from, bar.end)
    return drawn


def report_section(tl: Timeline, png: Path | None) -> Section:
    """The report's Timeline section; the PNG is embedded in the HTML so the page stands alone."""
    blocks: list = [Items(summary_lines(tl))]
    if png is not None and png.exists():
        blocks.append(Image(png, png.name, "timeline"))
    return Section("Timeline", blocks, id="timeline")


def run_timeline(run_dir: Path, draw: bool = False) -> tuple[Timeline, Path | None] | None:
    """The run's timeline (from its good trace events, with the notes a report shows beside it) and its
    PNG, or None without a trace. Without GPUs (a planned run) there is no job to draw, and no chart
    unless ``draw`` asks for one (``replay --timeline``): matplotlib costs a second."""
    if not (run_dir / "trace.jsonl").exists():
        return None
    timeline, stop = timeline_for_run(run_dir)
    if stop:
        timeline.notes.append(f"trace read up to a bad line: {stop}")
    if not (timeline.gpus or draw):
        timeline.notes.append("no GPU here: no chart (`dsv4-agent replay RUN --timeline` draws one)")
        return timeline, None
    return timeline, write_png(timeline, run_dir / "timeline.png")


def timeline_sections(run_dir: Path | str) -> list[Section]:
    """What every report rebuild adds after the measurement: the timeline (when there is a trace)."""
    found = run_timeline(Path(run_dir))
    return [report_section(*found)] if found else []


def warm_up() -> None:
    """matplotlib imported and a first figure drawn (fonts, the PNG writer), ahead of a real one."""
    from io import BytesIO

    from matplotlib.figure import Figure

    sample = Figure(figsize=(1, 1))
    sample.add_subplot().set_title("0")
    sample.savefig(BytesIO(), format="png")


def timeline_for_run(run_dir: Path | str) -> tuple[Timeline, str | None]:
    """The run's timeline from its good events, and why reading stopped early (None: whole trace)."""
    from agent.report.timeline import build_timeline
    from agent.run.trace import read_events

    run_dir = Path(run_dir)
    events, stop = read_events(run_dir / "trace.jsonl")
    known = [g["index"] for g in (RunFiles(run_dir).preflight() or {}).get("gpus", [])]
    return build_timeline(events, known), stop


def publish(run_dir: Path | str) -> tuple[Timeline, Path, str]:
    """Write timeline.png, add the Timeline section to the report; return the terminal view too."""
    from agent.report.build import build_report

    run_dir = Path(run_dir)
    tl, png = run_timeline(run_dir, draw=True)
    build_report(run_dir, extra_sections=[report_section(tl, png)])
    return tl, png, render_terminal(tl)
