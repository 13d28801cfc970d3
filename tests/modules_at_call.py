"""Runs a Python entry point and writes the names in ``sys.modules`` at a chosen call (test-only).

    python tests/modules_at_call.py MODULE:NAME FILE  ENTRY_MODULE:ENTRY_FUNCTION  [ARGS...]

At the first call of MODULE.NAME (NAME may be ``Class.method``) the sorted module names are written to
FILE as JSON, then the call runs; everything else is the real code, run as it is. Example: what a
campaign has imported when it launches its first job:

    python tests/modules_at_call.py tools.jobs.local:LocalExecutor.launch mods.json agent.commands.cli:main "tune kernels"
"""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path


def arm(spec: str, out: Path) -> None:
    module_name, name = spec.split(":")
    owner = importlib.import_module(module_name)
    *path, function = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, function)

    def wrapped(*args, **kwargs):
        if not out.exists():
            out.write_text(json.dumps(sorted(sys.modules)))
        return real(*args, **kwargs)

    setattr(owner, function, wrapped)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    spec, out, entry, *rest = sys.argv[1:]
    arm(spec, Path(out))
    module_name, function = entry.split(":")
    sys.argv = [entry, *rest]
    getattr(importlib.import_module(module_name), function)()


if __name__ == "__main__":
    main()
