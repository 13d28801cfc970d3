"""Runs a Python entry point and SIGKILLs its own process at a chosen instant (test-only).

    python tests/fault_injector.py MODULE:FUNCTION:N[:after]  ENTRY_MODULE:ENTRY_FUNCTION  [ARGS...]

The N-th call of MODULE.FUNCTION (or MODULE.Class.method) kills the process with SIGKILL before the
call runs, or with ``:after`` right after it returned: exactly what a
``kill -9`` (or a power cut) at that instant leaves behind, without timing luck. Everything else is
the real code: the product is not changed, only the one function is wrapped in this process.
Example: die as the second tuned config is about to be copied into SGLang's folder:

    python tests/fault_injector.py tools.tuning.host_install:replace:2 agent.commands.cli:main "tune kernels" ...
"""
from __future__ import annotations

import importlib
import inspect
import os
import signal
import sys
from pathlib import Path


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def arm(spec: str) -> None:
    """``MODULE:NAME:N`` or ``MODULE:NAME:N:after``; NAME may be ``Class.method``. With ``after`` the
    process dies right after the N-th call returned (its effect done, nothing after it)."""
    module_name, name, nth, *when = spec.split(":")
    owner = importlib.import_module(module_name)
    *path, function = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, function)
    calls = {"n": 0}
    after = when == ["after"]

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == int(nth) and not after:
            _die()
        result = real(*args, **kwargs)
        if calls["n"] == int(nth):
            _die()
        return result

    setattr(owner, function, wrapped)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    spec, entry, *rest = sys.argv[1:]
    arm(spec)
    module_name, function = entry.split(":")
    sys.argv = [entry, *rest]
    target = getattr(importlib.import_module(module_name), function)
    code = target(rest) if inspect.signature(target).parameters else target()  # main(argv) or main()
    sys.exit(code)


if __name__ == "__main__":
    main()
