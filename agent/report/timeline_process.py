"""The timeline's PNG drawn in a process of its own, beside work that does not need it.

- ``replay --timeline``: the timeline is a function of the record alone, so it is drawn while the
  command's own process imports LangGraph and re-drives the run, each on a core of its own.
- A campaign's report: a drawer started while the GPU jobs run (``warm_drawer``) has imported
  matplotlib by the time the report asks; it draws ``timeline.png`` while the report's own process
  draws the measurement plots. It ends on its own when the agent goes (its stdin closes).

    python -m agent.report.timeline_process RUN_DIR     prints {"png": ..., "text": ...} as JSON
    python -m agent.report.timeline_process --wait      reads {"png": PATH, "timeline": {...}} from stdin
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from typing import Callable, Iterator

from agent.report.blocks import Section
from agent.report.timeline import Bar, Timeline
from agent.report.timeline_view import read_timeline, report_section, write_png
from tools.base import ToolError
from tools.child_env import child_env

_DRAWER: list[subprocess.Popen] = []  # the warm drawer, until a report takes it


def start(run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agent.report.timeline_process", str(run_dir)], env=child_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(drawing: subprocess.Popen) -> tuple[Path, str]:
    """(timeline.png, the terminal view) once the drawing process ended; ToolError with its last words
    when it failed."""
    out, err = drawing.communicate()
    if drawing.returncode != 0:
        raise ToolError(f"drawing the timeline failed (exit {drawing.returncode}): {err.strip()[-800:]}")
    drawn = json.loads(out)
    return Path(drawn["png"]), drawn["text"]


def warm_drawer() -> None:
    """Start the drawer now (once per process), so that matplotlib's import is behind the report."""
    if not _DRAWER:
        _DRAWER.append(subprocess.Popen([sys.executable, "-m", "agent.report.timeline_process", "--wait"],
                                        env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True))


def hand_to_drawer(tl: Timeline, png: Path) -> Callable[[], bool] | None:
    """Give ``tl`` to the warm drawer; returns a wait that says whether it drew ``png`` (None: no drawer
    is there to take it, draw here)."""
    if not _DRAWER:
        return None
    drawer = _DRAWER.pop()
    try:
        drawer.stdin.write(json.dumps({"png": str(png), "timeline": asdict(tl)}) + "\n")
        drawer.stdin.close()  # it starts drawing now
        drawer.stdin = None  # so that communicate() only reads
    except OSError:  # it is gone (a broken pipe): the caller draws
        drawer.kill()
        drawer.wait()
        return None

    def drawn() -> bool:
        out, _err = drawer.communicate()
        return drawer.returncode == 0 and out.strip() == json.dumps({"png": str(png)})

    return drawn


def _wait_and_draw() -> int:
    from agent.report.timeline_view import warm_up

    warm_up()
    line = sys.stdin.readline()
    if not line:
        return 0  # the agent went without a report
    request = json.loads(line)
    record = request["timeline"]
    tl = Timeline(**{**record, "bars": [Bar(**bar) for bar in record["bars"]],
                     "critical_path": [tuple(step) for step in record["critical_path"]],
                     "slack": [tuple(step) for step in record["slack"]]})
    write_png(tl, Path(request["png"]))
    print(json.dumps({"png": request["png"]}))
    return 0


def timeline_sections_drawn_beside(run_dir: Path) -> Iterator[Section]:
    """``timeline_sections``, its PNG drawn by the warm drawer (below) while
    the caller builds the rest of the report. The drawer is handed the timeline now; the section is
    made when the caller takes it from the returned iterator (build_report does, after its plots)."""
    timeline = read_timeline(run_dir)
    if timeline is None:
        return iter(())
    if not timeline.gpus:
        return iter([report_section(timeline, None)])  # a planned run: no chart (its note says so)
    png = run_dir / "timeline.png"
    drawn = hand_to_drawer(timeline, png)  # drawing starts now

    def section() -> Iterator[Section]:
        yield report_section(timeline, png if drawn is not None and drawn() else write_png(timeline, png))

    return section()


def main(run_dir: str) -> int:
    from agent.report.timeline_view import publish

    _tl, png, text = publish(run_dir)
    print(json.dumps({"png": str(png), "text": text}))
    return 0


if __name__ == "__main__":
    sys.exit(_wait_and_draw() if sys.argv[1] == "--wait" else main(sys.argv[1]))
