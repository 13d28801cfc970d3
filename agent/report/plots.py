"""PNG plots of a benchmark comparison (matplotlib, Agg backend: no display needed).

TPOT, output throughput and accept length against concurrency, one line per variant (accept
length only where the point's own value was isolated).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: headless hosts and CI have no display
import matplotlib.pyplot as plt  # noqa: E402

from tools.measure.results import ComparisonRow  # noqa: E402


def _series(rows: list[ComparisonRow], metric: str) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        value = row.values.get(metric)
        if row.concurrency is not None and value is not None:
            series.setdefault(row.variant, []).append((row.concurrency, value))
    return {name: sorted(points) for name, points in series.items()}


def _line_plot(rows: list[ComparisonRow], metric: str, ylabel: str, title: str, path: Path) -> Path | None:
    series = _series(rows, metric)
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for name, points in series.items():
        ax.plot([c for c, _ in points], [v for _, v in points], marker="o", linewidth=2, label=name)
    ax.set_xscale("log", base=2)
    ticks = sorted({c for points in series.values() for c, _ in points})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("concurrency (--max-concurrency)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def write_plots(rows: list[ComparisonRow], out_dir: Path) -> list[Path]:
    """Write the plots that have data; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made = [
        _line_plot(rows, "median_tpot_ms", "median TPOT (ms)", "Time per output token vs concurrency",
                   out_dir / "tpot_vs_concurrency.png"),
        _line_plot(rows, "output_throughput", "output tokens/s", "Output throughput vs concurrency",
                   out_dir / "throughput_vs_concurrency.png"),
        # only points whose accept length was isolated have a value: a cumulative figure is not plotted
        _line_plot(rows, "accept_length", "accept length (tokens/step)",
                   "Speculative accept length per point", out_dir / "accept_length.png"),
    ]
    return [p for p in made if p is not None]
