"""Render serve_<variant>.sh and run_measure.sh from the jinja2 templates next to this module.

Every value goes through the ``q`` filter (``shlex.quote``) and every comment through ``comment``
(control characters, newlines included, become spaces), so text from repos, settings or an LLM
can neither run as shell code nor break out of a comment line. Templates render with
``StrictUndefined``: a missing variable is an error, never an empty string.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import jinja2
from pydantic import BaseModel, Field

from tools.measure.accept_snapshots import SNAPSHOT_PY
from tools.measure.accuracy import client_args
from tools.base import Tool, ToolError
from tools.scripts.models import (
    BenchPoint, EnvChoice, FlagChoice, MeasurePlan, ServeVariant, bench_args,
)

TEMPLATES = Path(__file__).with_name("templates")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def _quote(value: object) -> str:
    return shlex.quote(str(value))


def _comment(value: object) -> str:
    return _CONTROL.sub(" ", str(value))


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    )
    env.filters["q"] = _quote
    env.filters["comment"] = _comment
    return env


def render_serve_script(variant: ServeVariant, python: str = "python3", port: int = 30000) -> str:
    return _env().get_template("serve.sh.j2").render(v=variant, python=python, port=port)


def render_measure_script(plan: MeasurePlan, python: str = "python3") -> str:
    points: list[BenchPoint] = plan.points()
    gate = plan.accuracy
    # host and port are added per variant by the script
    accuracy_args = client_args(gate, "", "")[:-4] if gate is not None and gate.skip_reason is None else []
    return _env().get_template("run_measure.sh.j2").render(
        plan=plan, python=python, common=bench_args(plan), points=points, snapshot_py=SNAPSHOT_PY,
        accuracy_args=accuracy_args)


class RenderScriptsArgs(BaseModel):
    """Write reviewable shell scripts into a folder: serve_<variant>.sh for every variant and
    run_measure.sh (fresh server per variant, concurrency sweep with sglang.bench_serving)."""

    out_dir: str = Field(description="Folder to write the scripts into (the run folder)")
    plan: MeasurePlan = Field(description="Variants (flags with evidence) and the sweep")
    sglang_python: str = Field("python3", description="Default interpreter with SGLang installed")


class RenderScriptsResult(BaseModel):
    scripts: list[str] = Field(description="Paths written")
    run_command: str = Field(description="How to run the measurement on a GPU host")


def render_scripts(args: RenderScriptsArgs) -> RenderScriptsResult:
    out = Path(args.out_dir)
    names = [v.name for v in args.plan.variants]
    if len(set(names)) != len(names):
        raise ToolError(f"variant names {names} repeat; give every variant its own name")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ToolError(f"cannot create {out}: {err.strerror}; pick a writable folder") from None
    texts = {f"serve_{v.name}.sh": render_serve_script(v, args.sglang_python, args.plan.port)
             for v in args.plan.variants}
    texts["run_measure.sh"] = render_measure_script(args.plan, args.sglang_python)
    written = []
    for name, text in texts.items():
        path = out / name
        tmp = path.with_name(f".{name}.tmp{os.getpid()}")
        tmp.write_text(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)  # atomic: a re-run after a crash never leaves half a script
        written.append(str(path))
    return RenderScriptsResult(scripts=written, run_command=f"bash {shlex.quote(str(out / 'run_measure.sh'))}")


RENDER_SCRIPTS = Tool(name="render_scripts", args=RenderScriptsArgs, run=render_scripts)

__all__ = ["RENDER_SCRIPTS", "RenderScriptsArgs", "RenderScriptsResult", "EnvChoice", "FlagChoice",
           "MeasurePlan", "ServeVariant", "render_measure_script", "render_scripts", "render_serve_script"]
