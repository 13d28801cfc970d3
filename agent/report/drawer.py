"""The report's plots drawn by a process of their own, started while the GPU jobs run.

matplotlib's import and the four plots are the report's slowest part, and the report comes after the
last GPU job. So a campaign starts a drawer during the GPU jobs (``warm_drawer``: it imports matplotlib
and waits); once the benchmark's last point is measured, the point statistics are handed to it
(``hand_plots``) and it draws while the last server is checked and stopped. The report draws the
timeline in its own process meanwhile, and takes the drawer's plots only when they are of the very
statistics it computed itself (``plots_drawn_beside``); otherwise (no drawer, a drawer that died, results
that changed) it draws them itself. The drawer ends on its own when the agent goes (its stdin closes).

    python -m agent.report.drawer     reads {"stats": [...], "dir": DIR} from stdin, draws the plots
                                      into DIR, prints {"plots": [PATH, ...]}
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from tools.child_env import child_env
from tools.measure.verdict import PointStats

_LOCK = threading.Lock()  # the benchmark's thread hands, the report's thread takes
_WARM: list[subprocess.Popen] = []  # the drawer, until plots are handed to it


@dataclass
class _Handed:
    stats_json: str
    out_dir: Path  # absolute: the drawer's working folder is the one it was started in, maybe not the caller's now
    drawer: subprocess.Popen


_HANDED: list[_Handed] = []


def warm_drawer() -> None:
    """Start the drawer now (once per process), so that matplotlib's import is behind the report."""
    with _LOCK:
        if not _WARM and not _HANDED:
            _WARM.append(subprocess.Popen([sys.executable, "-m", "agent.report.drawer"], env=child_env(),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))


def _stats_json(stats: list[PointStats]) -> str:
    return json.dumps([s.model_dump(mode="json") for s in stats])


def hand_plots(stats: list[PointStats], out_dir: Path) -> bool:
    """Give ``stats`` to the warm drawer to draw into ``out_dir``; False when no drawer is there to take them."""
    with _LOCK:
        if not _WARM or not stats:
            return False
        drawer = _WARM.pop()
        request, target = _stats_json(stats), out_dir.resolve()
        try:
            drawer.stdin.write(f'{{"stats": {request}, "dir": {json.dumps(str(target))}}}\n')
            drawer.stdin.close()  # it starts drawing now
            drawer.stdin = None  # so that communicate() only reads
        except OSError:  # it is gone (a broken pipe): the report draws
            drawer.kill()
            drawer.wait()
            return False
        _HANDED.append(_Handed(request, target, drawer))
        return True


def hand_measured_plots(run_dir: Path) -> bool:
    """``hand_plots`` of the run's measured points, the statistics the report computes from bench/."""
    with _LOCK:
        if not _WARM:
            return False
    from tools.measure.decision import bench_records
    from tools.measure.verdict import point_stats

    records, _problems = bench_records(run_dir / "bench")
    return hand_plots(point_stats(records), run_dir / "plots")


DRAW_WAIT_S = 120.0  # drawing takes well under a second; a drawer stuck past this is killed and the report draws


def _taken(handed: _Handed) -> list[Path] | None:
    try:
        out, _err = handed.drawer.communicate(timeout=DRAW_WAIT_S)
    except subprocess.TimeoutExpired:
        handed.drawer.kill()  # our own child, started by warm_drawer
        handed.drawer.communicate()
        return None
    if handed.drawer.returncode != 0:
        return None
    try:
        return [Path(p) for p in json.loads(out)["plots"]]
    except (ValueError, KeyError, TypeError):
        return None


def plots_drawn_beside(stats: list[PointStats], out_dir: Path) -> list[Path]:
    """The plots of ``stats`` in ``out_dir``: the drawer's when it was handed exactly these for this folder, else
    drawn here. The paths are ``out_dir``'s, as the caller named it."""
    with _LOCK:
        handed = list(_HANDED)
        _HANDED.clear()
    drawn, wanted, target = None, _stats_json(stats), out_dir.resolve()
    for item in handed:  # every handed drawer is waited for: none is left behind as a zombie
        paths = _taken(item)
        if paths is not None and item.stats_json == wanted and item.out_dir == target:
            drawn = [out_dir / path.name for path in paths]
    if drawn is not None:
        return drawn
    from agent.report.plots import write_plots

    return write_plots(stats, out_dir)


def _serve() -> int:
    from agent.report.timeline_view import warm_up

    warm_up()
    from agent.report.plots import write_plots

    line = sys.stdin.readline()
    if not line:
        return 0  # the agent went without handing plots
    request = json.loads(line)
    stats = [PointStats.model_validate(s) for s in request["stats"]]
    paths = write_plots(stats, Path(request["dir"]))
    print(json.dumps({"plots": [str(p) for p in paths]}), flush=True)
    os._exit(0)  # the files are closed; tearing down matplotlib's interpreter would only keep the report waiting


if __name__ == "__main__":
    sys.exit(_serve())
