"""``replay --timeline``'s PNG drawn in a process of its own: the timeline is a function of the record
alone, so it is drawn while the command's own process imports LangGraph and re-drives the run, each on a
core of its own.

    python -m agent.report.timeline_process RUN_DIR     prints {"png": ..., "text": ...} as JSON
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tools.base import ToolError
from tools.child_env import child_env


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


def main(run_dir: str) -> int:
    from agent.report.timeline_view import publish

    _tl, png, text = publish(run_dir)
    print(json.dumps({"png": str(png), "text": text}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
