"""Reviewable shell scripts (serve_<variant>.sh, run_measure.sh): what they say (the plan models) and
their jinja2 templates; tools/measure/script_render.py renders them.

The names below are loaded on first use: settings validation needs the plan models, and a campaign's
first GPU job should not wait for what it does not run."""
import importlib

_WHERE = {"BenchPoint": "models", "EnvChoice": "models", "FlagChoice": "models", "MeasurePlan": "models",
          "ServeVariant": "models"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'tools.scripts' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tools.scripts.{_WHERE[name]}"), name)
