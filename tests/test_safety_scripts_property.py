"""Every script renderer, one property: any text in any field arrives as exactly one literal argument
when the rendered script is executed. The interpreter is tests/doubles/argv_dump (it records its
argv), reached through a link whose *name* is hostile text too; folders get hostile names; bash runs
the scripts for real. Renderers: serve_<variant>.sh and run_measure.sh (tools/measure/script_render.py),
the multi-node node scripts and the Slurm batch script (tools/scripts/multinode.py), the per-GPU
tuning scripts (tools/tuning/render.py)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from tools.scripts.models import EnvChoice, FlagChoice, MeasurePlan, ServeVariant, point_args
from tools.scripts.multinode import MultinodeServeArgs, node_argv, render_multinode_serve
from tools.measure.script_render import render_measure_script, render_serve_script, server_check_source
from tools.tuning.plan import Unit, plan_units
from tools.tuning.render import render_tuning
from tools.tuning.script import introspect_script

from tests.slowdown import limit

DOUBLES = Path(__file__).parent / "doubles"
HOSTILE = st.one_of(
    st.sampled_from(["'", '"', "$(touch /tmp/pwned)", "`id`", "; rm -rf ~", "a\nb", " x ", "\\", "${HOME}",
                     "*", "!", "-n", "-a", "--", "\t", "\r\n", "'\"'\"'", "\u2028", "--port 1", "=", "#", "{{ x }}"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20),
)
NAME = HOSTILE.filter(lambda t: "/" not in t and t not in (".", "..") and len(t.encode()) < 200)
RUNS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _interpreter(folder: Path, name: str) -> Path:
    """argv_dump reached through a link with a hostile name (it stands for --sglang-python)."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / f"py{name}"
    if not link.exists():
        link.symlink_to(DOUBLES / "argv_dump")
    return link


def _run(script: Path, dump: Path, append: bool = False, **env: str) -> list[dict]:
    dump.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=limit(60), env={
        **{k: v for k, v in os.environ.items() if k not in ("SGLANG_PYTHON", "PORT", "TP", "GPUS")},
        "ARGV_DUMP_FILE": str(dump), "ARGV_DUMP_APPEND": "1" if append else "", "ARGV_DUMP_ENV": "SECRET_ENV",
        "DSV4_DOUBLE_REAL_PYTHON": sys.executable, **env})
    assert dump.exists(), done.stdout + done.stderr
    text = dump.read_text()
    return [json.loads(line) for line in text.splitlines()] if append else [json.loads(text)]


def _variant(model: str, value: str, env: str, source: str) -> ServeVariant:
    return ServeVariant(name="mtp", model_path=model, tp=1, gpus=[0], rationale=[source],
                        flags=[FlagChoice(flag="--speculative-algorithm", value=value, source=source),
                               FlagChoice(flag="--enable-switch", source=source)],
                        env=[EnvChoice(name="SECRET_ENV", value=env, source=source)])


@RUNS
@given(model=HOSTILE, value=HOSTILE, env=HOSTILE, source=HOSTILE, python=NAME)
def test_serve_script(tmp_path_factory, model, value, env, source, python):
    folder = tmp_path_factory.mktemp("serve")
    variant = _variant(model, value, env, source)
    script = folder / "serve_mtp.sh"
    script.write_text(render_serve_script(variant, python=str(_interpreter(folder / "bin", python)), port=31234))
    seen = _run(script, folder / "argv.json")[0]
    assert seen["argv"] == variant.launch_args(31234) and seen["env"] == {"SECRET_ENV": env}


@RUNS
@given(model=HOSTILE, tokenizer=HOSTILE, value=HOSTILE, python=NAME, where=NAME)
def test_run_measure_script(tmp_path_factory, model, tokenizer, value, python, where):
    folder = tmp_path_factory.mktemp("measure") / where
    folder.mkdir()
    variant = _variant(model, value, "x", "why")
    plan = MeasurePlan(variants=[variant], concurrency=[2], tokenizer=tokenizer, ready_timeout_s=5)
    interpreter = _interpreter(folder.parent / "bin", python)
    (folder / "run_measure.sh").write_text(render_measure_script(plan, python=str(interpreter)))
    (folder / "serve_mtp.sh").write_text(render_serve_script(variant, python=str(interpreter)))
    (folder / "server_check.py").write_text(server_check_source())
    calls = _run(folder / "run_measure.sh", folder.parent / "argv.jsonl", append=True)
    server = next(c["argv"] for c in calls if c["argv"][:2] == ["-m", "sglang.launch_server"])
    assert server == variant.launch_args(plan.port)  # PORT from `server_check.py free-port`: here empty, so the default
    bench = next(c["argv"] for c in calls if c["argv"][:2] == ["-m", plan.client_module])
    point = plan.points()[0]
    assert bench == point_args(plan, "mtp", point, "127.0.0.1", "", str(folder / "bench" / "mtp.jsonl"))


@RUNS
@given(model=HOSTILE, extra=HOSTILE, env=HOSTILE, python=NAME, where=NAME)
def test_multinode_scripts(tmp_path_factory, model, extra, env, python, where):
    folder = tmp_path_factory.mktemp("multinode")
    args = MultinodeServeArgs(model_path=model, nnodes=2, tp_size=2, dist_init_addr="node0:5000",
                              python=str(_interpreter(folder / "bin", python)), extra_args=["--flag", extra],
                              env={"SECRET_ENV": env}, out_dir=str(folder / where))
    result = render_multinode_serve(args)
    seen = _run(Path(result.node_scripts[1]), folder / "argv.json")[0]
    assert seen["argv"] == node_argv(args, 1, "node0:5000")[1:] and seen["env"] == {"SECRET_ENV": env}
    fake = folder / "slurm-bin"
    fake.mkdir()
    for name, body in (("scontrol", "echo node7"), ("srun", 'while [[ "$1" == --* ]]; do shift; done\n'
                                                         'SLURM_NODEID=0 exec "$@"')):
        (fake / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (fake / name).chmod(0o755)
    seen = _run(Path(result.sbatch_script), folder / "argv.json", PATH=f"{fake}:{os.environ['PATH']}",
                SLURM_JOB_NODELIST="node7")[0]
    assert seen["argv"] == node_argv(args, 0, "node7:5000")[1:]


@RUNS
@given(python=NAME, checkout=NAME, where=NAME, dtype=HOSTILE, input_type=HOSTILE)
def test_tuning_scripts(tmp_path_factory, python, checkout, where, dtype, input_type):
    folder = tmp_path_factory.mktemp("tuning")
    script = folder / checkout / "benchmark" / "kernels" / "quantization" / "tuning_block_wise_kernel.py"
    script.parent.mkdir(parents=True)
    shutil.copy(DOUBLES / "tuning_block_wise_kernel.py", script)
    info = introspect_script(script)
    plan = plan_units([Unit(n=512, k=1024, m=1, cost=1.0)], [0])
    out = folder / where / "tuning"
    rendered = render_tuning(out, plan.per_gpu, info, python=str(_interpreter(folder / "bin", python)),
                             device_name="NVIDIA H200", out_dtype=dtype, input_type=input_type)
    gpu_script = out.parent / rendered.scripts[0]
    assert gpu_script.stat().st_mode & stat.S_IXUSR
    seen = _run(gpu_script, folder / "argv.json")[0]["argv"]
    assert rendered.mode == "driver"  # the double's tune() is driven (it takes no shape list)
    assert seen == [str(out / "tune_driver.py"), "--script", str(script), "--units", str(out / "units_gpu0.json"),
                    "--save-path", str(out / "out" / "gpu0"), "--out-dtype", dtype, "--input-type", input_type]
