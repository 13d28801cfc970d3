"""A [32, 32] checkpoint is tuned, not skipped: the agent's driver against SGLang's real tuning script
(read by AST from the upstream corpus: it cannot be imported without a GPU stack, and its text is
data) and against the double that stands in for it, with file names exactly as SGLang looks them up."""
import ast
import importlib.util
import itertools
import json
import subprocess
import sys
import types
from pathlib import Path

from tests.conftest import missing, shared_corpus
from tests.slowdown import limit
from tests.tuning_fixtures import SCRIPT_DOUBLE
from tools.tuning.configs import config_file_name, parse_config_file_name
from tools.tuning.plan import make_units, plan_units
from tools.tuning.render import render_tuning
from tools.tuning.script import SCRIPT_RELATIVE, block_k_options, introspect_script, introspect_source
from tools.tuning.shapes import Shape

BLOCK_32_FILE = "N=5120,K=15360,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[32, 32].json"


def real_script() -> Path:
    corpus = shared_corpus()
    if corpus is None:
        missing("no shared/corpus next to the repository (CI provides it at ../shared)")
    return corpus / "sglang-upstream" / SCRIPT_RELATIVE


def cuda_grid(tree: ast.Module) -> list[dict]:
    """``get_configs_compute_bound``'s CUDA branch, evaluated from its literal loops (never run)."""
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_configs_compute_bound")
    branch = next(n for n in func.body if isinstance(n, ast.If)).orelse
    loops = [n for b in branch for n in ast.walk(b) if isinstance(n, ast.For)]
    names = [loop.target.id for loop in loops]
    values = [ast.literal_eval(loop.iter) for loop in loops]
    built = next(n for b in branch for n in ast.walk(b) if isinstance(n, ast.Dict))
    keys = {key.value: value.id for key, value in zip(built.keys, built.values, strict=True)}
    return [{key: dict(zip(names, combo, strict=True))[var] for key, var in keys.items()} for combo in itertools.product(*values)]


def real_filter(tree: ast.Module):
    """The real script's candidate filter in ``tune_on_gpu``, checked to be the one the driver keeps."""
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "tune_on_gpu")
    condition = next(n for n in ast.walk(func) if isinstance(n, ast.ListComp)).generators[0].ifs[0]
    assert ast.unparse(condition) == "block_k % config['BLOCK_SIZE_K'] == 0"
    return lambda space, block_k: [config for config in space if block_k % config["BLOCK_SIZE_K"] == 0]


def rendered_driver(tmp_path: Path) -> types.ModuleType:
    units = make_units([Shape(n=5120, k=15360, block_n=32, block_k=32, source="user")], [1, 64])
    render_tuning(tmp_path / "tuning", plan_units(units, [0]).per_gpu, introspect_script(SCRIPT_DOUBLE),
                  python=sys.executable, device_name="NVIDIA H200")
    spec = importlib.util.spec_from_file_location("tune_driver", tmp_path / "tuning" / "tune_driver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # our own generated file; its main() is guarded
    return module


def test_the_real_scripts_filter_leaves_nothing_at_block_32_and_the_driver_keeps_candidates(tmp_path):
    tree = ast.parse(real_script().read_text())
    grid, keep = cuda_grid(tree), real_filter(tree)
    assert block_k_options(tree) == [64, 128] and {c["BLOCK_SIZE_K"] for c in grid} == {64, 128}
    assert keep(grid, 32) == []  # SGLang's own script: no config at block 32
    driver = rendered_driver(tmp_path)
    for script in (types.SimpleNamespace(get_configs_compute_bound=lambda: grid),
                   _load(SCRIPT_DOUBLE)):
        assert script.get_configs_compute_bound() == grid  # the double is held to the real grid
        at_32 = driver.search_space(script, 32)
        assert at_32 and {c["BLOCK_SIZE_K"] for c in at_32} == {32}
        assert len({json.dumps(c, sort_keys=True) for c in at_32}) == len(at_32) == len(grid) // 2
        assert driver.search_space(script, 128) == keep(grid, 128)  # where the real filter works, the same
    assert driver.file_name(5120, 15360, "NVIDIA_H200", 32, 32, "fp8") == BLOCK_32_FILE
    assert config_file_name(5120, 15360, "NVIDIA H200", 32, 32) == BLOCK_32_FILE
    assert parse_config_file_name(BLOCK_32_FILE)["block_k"] == 32


def _load(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("tuning_double", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_driver_tunes_block_32_on_the_double_with_sglangs_device_names(tmp_path):
    rendered_driver(tmp_path)
    units = tmp_path / "tuning" / "units_gpu0.json"  # N=5120 K=15360 (V4.1's DSpark main_proj) at M 1 and 64
    assert {(u["block_n"], u["block_k"]) for u in json.loads(units.read_text())["units"]} == {(32, 32)}
    names = {}
    for device in ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                   "NVIDIA RTX PRO 6000 Blackwell Server Edition"):
        out = tmp_path / device.split()[-2]
        done = subprocess.run([sys.executable, str(tmp_path / "tuning/tune_driver.py"), "--script", str(SCRIPT_DOUBLE),
                               "--units", str(units), "--save-path", str(out)], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "DSV4_DOUBLE_DEVICE_NAME": device, "DSV4_DOUBLE_UNIT_S": "0"},
                              timeout=limit(60))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "block_k 32: 640 candidate configs" in done.stdout
        (written,) = out.iterdir()
        assert written.name == config_file_name(5120, 15360, device, 32, 32)
        assert {c["BLOCK_SIZE_K"] for c in json.loads(written.read_text()).values()} == {32}
        names[device] = written.name
    assert len(set(names.values())) == 2  # a Max-Q and a Server card never share a table


def test_a_script_taking_shapes_is_still_driven_at_block_32(tmp_path):
    source = SCRIPT_DOUBLE.read_text().replace(
        'parser.add_argument("--batch-size", type=int, required=False)',
        'parser.add_argument("--N", type=int)\n    parser.add_argument("--K", type=int)\n'
        '    parser.add_argument("--batch-sizes", type=int, nargs="+")')
    info = introspect_source(source, "/src/sglang/benchmark/kernels/quantization/tuning_block_wise_kernel.py")
    work = plan_units(make_units([Shape(n=5120, k=1024, block_n=32, block_k=32, source="user")], [1]), [0]).per_gpu
    assert render_tuning(tmp_path / "a", work, info, python="python3", device_name="NVIDIA H200").mode == "driver"
    work = plan_units(make_units([Shape(n=5120, k=1024, source="user")], [1]), [0]).per_gpu
    assert render_tuning(tmp_path / "b", work, info, python="python3", device_name="NVIDIA H200").mode == "direct"
