"""PNG plots of the measurement (matplotlib, Agg backend: no display needed).

Per variant, against concurrency: median TPOT and output throughput (bars show the range of the
repeats), accept length (only points whose own value was isolated); and latency against
throughput (median TPOT over output tok/s, one point per concurrency), the curve a deployment is
chosen on. A variant has one colour in every plot (the baseline the first of matplotlib's cycle,
then the others in the order they were measured); each PNG names the colours it drew in its
``dsv4-plot`` text chunk (JSON), so a test can check them.
"""
from __future__ import annotations

from pathlib import Path

# The Figure API, not pyplot: no display or backend to pick on a headless host, no global figure
# registry shared by threads, and a fifth less to import.
import json

from matplotlib import rcParams
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from tools.measure.verdict import BASELINE, PointStats

PNG_META_KEY = "dsv4-plot"
Colours = dict[str, str]


def variant_colours(stats: list[PointStats]) -> Colours:
    """One colour per variant, the same in every plot: the baseline first, then in measured order."""
    names = list(dict.fromkeys(s.variant for s in stats))
    names.sort(key=lambda n: n != BASELINE)  # stable: the others keep their order
    cycle = rcParams["axes.prop_cycle"].by_key()["color"]
    return {name: to_hex(cycle[i % len(cycle)]) for i, name in enumerate(names)}


def _series(stats: list[PointStats], metric: str) -> dict[str, list[tuple[int, float, float, float]]]:
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for s in stats:
        if metric == "accept_length":
            if s.accept_length is not None:
                series.setdefault(s.variant, []).append((s.concurrency, s.accept_length, s.accept_length,
                                                         s.accept_length))
        elif metric in s.metrics:
            m = s.metrics[metric]
            series.setdefault(s.variant, []).append((s.concurrency, m.median, m.low, m.high))
    return {name: sorted(points) for name, points in series.items()}


def _save(fig, ax, title: str, path: Path) -> Path:
    ax.set_title(title, y=1.0, pad=6)  # a title placed by hand: matplotlib's own placement measures every tick label
    ax.grid(True, alpha=0.3)
    ax.legend()
    # Fixed margins that fit six-digit ticks and the axis labels, instead of tight_layout: laying out
    # each figure again to measure its text took a third of the report's time, after the GPU work.
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.15, top=0.9)
    handles, names = ax.get_legend_handles_labels()
    drawn = {name: to_hex((h[0] if isinstance(h, tuple) else h).get_color()) for h, name in zip(handles, names, strict=True)}
    fig.savefig(path, format="png", metadata={PNG_META_KEY: json.dumps({"colours": drawn})},
                pil_kwargs={"compress_level": 1})  # zlib's fastest: a few kB more per plot, a tenth of its time
    return path


def _line_plot(stats: list[PointStats], metric: str, ylabel: str, title: str, path: Path,
               colours: Colours) -> Path | None:
    series = _series(stats, metric)
    if not series:
        return None
    fig = Figure(figsize=(6, 3.6), dpi=100)
    ax = fig.add_subplot()
    for name, points in series.items():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.errorbar(xs, ys, yerr=[[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]], marker="o",
                    linewidth=2, capsize=3, label=name, color=colours[name])
    ax.set_xscale("log", base=2)
    ax.xaxis.set_minor_locator(NullLocator())  # the concurrencies are the ticks; log minor ticks only cost time
    ticks = sorted({p[0] for points in series.values() for p in points})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("concurrency (--max-concurrency)")
    ax.set_ylabel(ylabel)
    return _save(fig, ax, title, path)


def _latency_vs_throughput(stats: list[PointStats], path: Path, colours: Colours) -> Path | None:
    tpot, thr = _series(stats, "median_tpot_ms"), _series(stats, "output_throughput")
    names = [n for n in tpot if n in thr]
    if not names:
        return None
    fig = Figure(figsize=(6, 3.6), dpi=100)
    ax = fig.add_subplot()
    for name in names:
        latency = {p[0]: p[1] for p in tpot[name]}
        pairs = sorted((t[1], latency[t[0]], t[0]) for t in thr[name] if t[0] in latency)
        ax.plot([p[0] for p in pairs], [p[1] for p in pairs], marker="o", linewidth=2, label=name,
                color=colours[name])
        for x, y, conc in pairs:
            ax.annotate(f"c{conc}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("output tokens/s (median of repeats)")
    ax.set_ylabel("median TPOT (ms)")
    return _save(fig, ax, "Latency vs throughput (labels: concurrency)", path)


def write_plots(stats: list[PointStats], out_dir: Path) -> list[Path]:
    """Write the plots that have data; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    colours = variant_colours(stats)
    made = [
        _line_plot(stats, "median_tpot_ms", "median TPOT (ms)", "Time per output token vs concurrency",
                   out_dir / "tpot_vs_concurrency.png", colours),
        _line_plot(stats, "output_throughput", "output tokens/s", "Output throughput vs concurrency",
                   out_dir / "throughput_vs_concurrency.png", colours),
        _latency_vs_throughput(stats, out_dir / "latency_vs_throughput.png", colours),
        # only points whose accept length was isolated have a value: a cumulative figure is not plotted
        _line_plot(stats, "accept_length", "accept length (tokens/step)",
                   "Speculative accept length per point", out_dir / "accept_length.png", colours),
    ]
    return [p for p in made if p is not None]
