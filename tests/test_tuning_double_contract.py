"""The tuning-script double (tests/doubles/tuning_block_wise_kernel.py) held to SGLang's real script
in the upstream corpus: the same argparse flags, the top-level names our driver calls with parameters
it can fill, and the same config-file name. The real script is read by AST only (importing it needs
torch, triton and a GPU, and its text is data), so a rename upstream fails here, not on a GPU host."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import missing, shared_corpus
from tests.tuning_fixtures import SCRIPT_DOUBLE
from tools.tuning.configs import config_file_name
from tools.tuning.plan import make_units, plan_units
from tools.tuning.render import render_tuning
from tools.tuning.script import DRIVER_PARAMS, SCRIPT_RELATIVE, introspect_source
from tools.tuning.shapes import Shape

# What the driver (tools/tuning/driver_template.py) reaches in the script: called, or read when present.
DRIVER_CALLS = ("get_configs_compute_bound", "tune")
DRIVER_READS = ("get_device_name", "DTYPE_MAP")
# Flags of a newer upstream script that takes shapes (render.py's direct mode); not in this one
SHAPE_FLAGS = ('parser.add_argument("--batch-size", type=int, required=False)',
               'parser.add_argument("--N", type=int)\n    parser.add_argument("--K", type=int)\n'
               '    parser.add_argument("--batch-sizes", type=int, nargs="+")')


def _real() -> ast.Module:
    corpus = shared_corpus()
    if corpus is None:
        missing("no shared/corpus next to the repository (CI provides it at ../shared)")
    return ast.parse((corpus / "sglang-upstream" / SCRIPT_RELATIVE).read_text())


def _double() -> ast.Module:
    return ast.parse(SCRIPT_DOUBLE.read_text())


def argparse_flags(tree: ast.Module) -> dict[tuple[str, ...], dict[str, str | None]]:
    """Each ``add_argument``'s names -> its dest, type, nargs, choices and whether required, as source text."""
    flags = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = tuple(a.value for a in node.args if isinstance(a, ast.Constant))
            given = {k.arg: ast.unparse(k.value) for k in node.keywords if k.arg}
            long = next(n for n in names if n.startswith("--"))
            flags[names] = {"dest": given.get("dest", repr(long[2:].replace("-", "_"))), "type": given.get("type"),
                            "nargs": given.get("nargs"), "choices": given.get("choices"),
                            "required": given.get("required")}
    return flags


def top_level(tree: ast.Module) -> dict[str, list[str] | None]:
    """Names bound at the top level -> a function's parameter names (None for anything else: an import, a value)."""
    names: dict[str, list[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = [a.arg for a in node.args.args + node.args.kwonlyargs]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, ast.Assign):
            names.update({t.id: None for t in node.targets if isinstance(t, ast.Name)})
    return names


def dict_keys(tree: ast.Module, name: str) -> set[str]:
    value = next(n.value for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return {ast.literal_eval(k) for k in value.keys}


def saved_file_name(tree: ast.Module, **values) -> str:
    """The name ``save_configs`` writes: its ``json_file_name`` f-string filled from ``values`` by hand
    (its pieces are read, never evaluated)."""
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "save_configs")
    text = next(n.value for n in ast.walk(func) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "json_file_name" for t in n.targets))
    pieces = []
    for piece in text.values:
        if isinstance(piece, ast.Constant):
            pieces.append(piece.value)
        else:
            assert isinstance(piece.value, ast.Name) and piece.conversion == -1 and piece.format_spec is None
            pieces.append(str(values[piece.value.id]))
    return "".join(pieces)


def test_the_double_takes_the_real_scripts_flags_with_the_same_dest_and_type():
    real, double = argparse_flags(_real()), argparse_flags(_double())
    assert ("--block-n",) in real and real[("--tp-size", "-tp")]["type"] == "int"  # the reader reads this script
    assert double == real


def test_every_flag_the_agent_passes_a_tuning_script_is_one_the_real_script_takes(tmp_path):
    # The agent's direct mode, rendered for the double given the shape flags of a newer upstream: the flags it
    # writes on the script's command line, beside those shape flags, must all be the real script's.
    info = introspect_source(SCRIPT_DOUBLE.read_text().replace(*SHAPE_FLAGS), str(SCRIPT_DOUBLE))
    work = plan_units(make_units([Shape(n=5120, k=1024, source="user")], [1]), [0]).per_gpu
    rendered = render_tuning(tmp_path, work, info, python="python3", device_name="NVIDIA H200")
    assert rendered.mode == "direct"
    script = (tmp_path / Path(rendered.scripts[0]).name).read_text()
    line = next(x for x in script.splitlines() if '"$tuning_script"' in x)
    passed = set(re.findall(r"(?<!\S)--[a-z][\w-]*", line)) - {"--N", "--K", "--batch-sizes"}
    assert {"--block-n", "--block-k", "--out-dtype", "--input-type", "--save-path"} <= passed
    real = {name for names in argparse_flags(_real()) for name in names}
    assert passed <= real, sorted(passed - real)


def test_the_double_defines_what_the_driver_calls_with_the_real_parameters():
    real, double = top_level(_real()), top_level(_double())
    for name in DRIVER_CALLS:
        assert real[name] is not None and double[name] == real[name], name
    assert set(real["tune"]) <= DRIVER_PARAMS  # every parameter of tune() is one the driver fills
    assert real["get_configs_compute_bound"] == []
    for name in DRIVER_READS:
        assert name in real and name in double, name
    assert dict_keys(_double(), "DTYPE_MAP") == dict_keys(_real(), "DTYPE_MAP")
    assert real["save_configs"] == double["save_configs"]


def test_the_double_writes_the_real_config_file_name():
    values = {"N": 5120, "K": 15360, "device_name": "NVIDIA_H200", "input_type": "fp8", "block_n": 32, "block_k": 32}
    real = saved_file_name(_real(), **values)
    assert real == saved_file_name(_double(), **values)
    assert real == config_file_name(5120, 15360, "NVIDIA H200", 32, 32)
    assert real == "N=5120,K=15360,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[32, 32].json"
