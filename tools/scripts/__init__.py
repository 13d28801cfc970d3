"""Reviewable shell scripts (serve_<variant>.sh, run_measure.sh) rendered from jinja2 templates."""
from tools.scripts.models import BenchPoint, EnvChoice, FlagChoice, MeasurePlan, ServeVariant
from tools.scripts.render import (
    RENDER_SCRIPTS, RenderScriptsArgs, RenderScriptsResult,
    render_measure_script, render_scripts, render_serve_script,
)

__all__ = ["RENDER_SCRIPTS", "BenchPoint", "EnvChoice", "FlagChoice", "MeasurePlan", "RenderScriptsArgs", "RenderScriptsResult",
           "ServeVariant", "render_measure_script", "render_scripts", "render_serve_script"]
