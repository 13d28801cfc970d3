"""Which module is SGLang's bench client in the SGLang version at hand.

0.5.23 moved the client to ``sglang.benchmark.serving`` and keeps ``sglang.bench_serving`` as a
deprecated shim over it; older versions have only ``sglang.bench_serving``. The source tree says
which: the new module's file exists or not.
"""
from __future__ import annotations

from pathlib import Path
from tools.source.layout import find_package

CURRENT, OLDER = "sglang.benchmark.serving", "sglang.bench_serving"


def package_dir(root: Path | str) -> Path:
    """The ``sglang/`` package folder of a checkout (python/sglang), a wheel (sglang) or the package itself."""
    return find_package(root) or Path(root)


def bench_client_module(root: Path | str | None) -> str:
    if root is not None and (package_dir(root) / "benchmark" / "serving.py").exists():
        return CURRENT
    return OLDER
