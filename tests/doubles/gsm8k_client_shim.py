"""Import shim that runs SGLang's REAL GSM8K few-shot check (``python -m sglang.test.few_shot_gsm8k``)
from the unpacked sglang 0.5.23 wheel without installing sglang or torch. Test-only.

    python gsm8k_client_shim.py [few_shot_gsm8k arguments...]

``sglang/test/few_shot_gsm8k.py`` and the SGLang frontend language it runs on (``sglang.lang``:
``function``, ``gen``, ``RuntimeEndpoint``, ``run_batch``) run unmodified. On top of the stubs of
tests/doubles/bench_client_shim.py (the runtime's ``__init__`` is not executed):

1. the package ``sglang`` gets the names the wheel's own ``sglang/__init__.py`` imports from
   ``sglang.lang.*`` (read from that file, so they follow the wheel), since ``few_shot_gsm8k`` uses
   ``import sglang as sgl; sgl.function; sgl.gen``. The ``__init__``'s other imports (the Hugging
   Face patches and the runtime's lazy imports) need torch and are not made;
2. ``IPython.display`` (``HTML``, ``display``: used by ``sglang.utils`` only for notebooks) is a
   module whose two names do nothing.
"""
from __future__ import annotations

import ast
import importlib
import runpy
import sys
import types
import warnings

from bench_client_shim import install, wheel_root


def _notebook_stub() -> None:
    ipython = types.ModuleType("IPython")
    display = types.ModuleType("IPython.display")
    display.HTML = lambda *_a, **_k: None
    display.display = lambda *_a, **_k: None
    ipython.display = display
    sys.modules.setdefault("IPython", ipython)
    sys.modules.setdefault("IPython.display", display)


def _frontend_names() -> None:
    """What ``import sglang`` would give the frontend language: the __init__'s sglang.lang imports."""
    package = sys.modules["sglang"]
    tree = ast.parse((wheel_root() / "sglang" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sglang.lang"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                setattr(package, alias.asname or alias.name, getattr(module, alias.name))


def main() -> None:
    install(wheel_root())
    _notebook_stub()
    _frontend_names()
    warnings.simplefilter("ignore", DeprecationWarning)  # the module announces its own deprecation
    sys.argv = ["sglang.test.few_shot_gsm8k", *sys.argv[1:]]
    runpy.run_module("sglang.test.few_shot_gsm8k", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
