"""pyflakes-class checks (ruff's F rules) over our code: unused imports and names, undefined names."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_pyflakes_findings():
    ruff = Path(sys.executable).with_name("ruff")
    out = subprocess.run([str(ruff), "check", "--select", "F", "--output-format", "concise", "agent", "tools",
                          "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
