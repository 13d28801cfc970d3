"""Static introspection of SGLang's ``tuning_block_wise_kernel.py``: its flags and functions.

The script is read with ``ast``, never imported or run here (importing it needs torch, triton
and a GPU, and its text is data). Its flags vary by version (``--batch-size`` vs
``--batch-sizes``, newer ``--N``/``--K``), so we learn them before writing any command.
"""
from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel, Field

from tools.base import Tool, ToolError

SCRIPT_RELATIVE = "benchmark/kernels/quantization/tuning_block_wise_kernel.py"
# Parameter names the driver knows how to fill for the script's own ``tune`` function.
DRIVER_PARAMS = {"M", "batch_size", "N", "K", "block_size", "out_dtype", "search_space", "input_type"}


class ScriptFlag(BaseModel):
    names: list[str]
    dest: str
    default: str | None = None
    nargs: str | None = None
    required: bool = False
    choices: list[str] | None = None


class ScriptInfo(BaseModel):
    path: str
    flags: list[ScriptFlag]
    functions: dict[str, list[str]] = Field(description="Top-level function name -> parameter names")
    accepts_shapes: bool = Field(description="Has --N and --K: custom shapes go on the command line")
    batch_list_flag: str | None = Field(description="Flag taking several batch sizes, if any")
    batch_flag: str | None = Field(description="Flag taking one batch size, if any")
    save_flag: str | None
    drivable: bool = Field(description="tune() and its parameters are ones the driver can fill")
    block_k_options: list[int] | None = Field(None, description="BLOCK_SIZE_K values of the script's CUDA search "
                                                                "grid (None: not readable)")
    notes: list[str] = Field(default_factory=list)

    def flag(self, *names: str) -> ScriptFlag | None:
        for flag in self.flags:
            if any(n in flag.names for n in names):
                return flag
        return None


def find_script(sglang_root: Path | None) -> Path:
    """The tuning script in a checkout; a clear error (what is missing, how to get it) otherwise."""
    if sglang_root is None:
        raise ToolError("SGLang source not resolved: pass --sglang-src PATH to a git checkout of "
                        "https://github.com/sgl-project/sglang (the tuning script lives in its benchmark/ folder)")
    root = Path(sglang_root)
    for base in (root, root.parent, root.parent.parent):
        path = base / SCRIPT_RELATIVE
        if path.exists():
            return path
    raise ToolError(f"{root} has no {SCRIPT_RELATIVE}: a PyPI wheel or installed package ships no benchmark/ "
                    "folder. Get a checkout of the same version (git clone https://github.com/sgl-project/sglang "
                    "&& git -C sglang checkout v<version>) and pass --sglang-src PATH/sglang")


def _literal(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    try:
        return repr(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError):
        return ast.unparse(node)


def block_k_options(tree: ast.Module) -> list[int] | None:
    """The BLOCK_SIZE_K values ``get_configs_compute_bound`` loops over (its CUDA grid), read from the
    loop that feeds the ``"BLOCK_SIZE_K"`` key; None when the script does not say it literally."""
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_configs_compute_bound"), None)
    if func is None:
        return None
    names = {value.id for node in ast.walk(func) if isinstance(node, ast.Dict)
             for key, value in zip(node.keys, node.values, strict=True)
             if isinstance(key, ast.Constant) and key.value == "BLOCK_SIZE_K" and isinstance(value, ast.Name)}
    for node in ast.walk(func):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id in names:
            try:
                values = ast.literal_eval(node.iter)
            except (ValueError, TypeError, SyntaxError):
                return None
            return sorted(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    return None


def introspect_source(text: str, path: str = "<script>") -> ScriptInfo:
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise ToolError(f"{path} is not valid Python ({err.msg}, line {err.lineno}); check the checkout") from None
    flags: list[ScriptFlag] = []
    functions: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = [a.arg for a in node.args.args + node.args.kwonlyargs]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not names:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        long = next((n for n in names if n.startswith("--")), names[0])
        dest = (ast.literal_eval(kw["dest"]) if "dest" in kw and isinstance(kw["dest"], ast.Constant)
                else long.lstrip("-").replace("-", "_"))
        choices = None
        if "choices" in kw and isinstance(kw["choices"], (ast.List, ast.Tuple)):
            choices = [str(ast.literal_eval(e)) for e in kw["choices"].elts if isinstance(e, ast.Constant)]
        flags.append(ScriptFlag(names=names, dest=dest, default=_literal(kw.get("default")),
                                nargs=_literal(kw.get("nargs")), required=_literal(kw.get("required")) == "True",
                                choices=choices))
    info = ScriptInfo(path=path, flags=flags, functions=functions, accepts_shapes=False,
                      batch_list_flag=None, batch_flag=None, save_flag=None, drivable=False,
                      block_k_options=block_k_options(tree))
    n_flag, k_flag = info.flag("--N", "--n"), info.flag("--K", "--k")
    info.accepts_shapes = n_flag is not None and k_flag is not None
    for flag in flags:
        long = next((n for n in flag.names if n.startswith("--")), "")
        if long in ("--batch-sizes", "--batch_sizes") or (long in ("--batch-size", "--batch_size") and flag.nargs):
            info.batch_list_flag = long
        elif long in ("--batch-size", "--batch_size"):
            info.batch_flag = long
        elif long in ("--save-path", "--save_path"):
            info.save_flag = long
    tune = functions.get("tune")
    if tune is None:
        info.notes.append("no top-level tune() function: the driver cannot call the script's own search")
    else:
        unknown = [p for p in tune if p not in DRIVER_PARAMS]
        info.drivable = not unknown
        if unknown:
            info.notes.append(f"tune() takes parameters the driver does not know: {unknown}")
    if not info.accepts_shapes:
        info.notes.append("no --N/--K flags: the script tunes its built-in DeepSeek-V3 shape list only, "
                          "so a driver calling its tune() with our shapes is written instead")
    return info


def introspect_script(path: Path) -> ScriptInfo:
    return introspect_source(Path(path).read_text(errors="replace"), str(path))


class IntrospectArgs(BaseModel):
    """Read the SGLang FP8 block-GEMM tuning script's argparse flags and functions (static, never run)."""

    sglang_root: str = Field(description="SGLang git checkout root (the script is in benchmark/)")


def introspect(args: IntrospectArgs) -> ScriptInfo:
    return introspect_script(find_script(Path(args.sglang_root)))


INTROSPECT_TUNING_SCRIPT = Tool(name="introspect_tuning_script", args=IntrospectArgs, run=introspect)
