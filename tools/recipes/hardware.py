"""Hardware hints of a test file: CI registration calls, runner configs and folder names.

``register_cuda_ci(est_time=..., suite="stage-c-test-4-gpu-h100")`` names the runner a test
runs on; folder names (``4-gpu-models``, ``amd/``) and file names (``..._gb300_...``) say it
too. We report the most specific hint found, as written.
"""
from __future__ import annotations

import ast
import re

from tools.recipes.modules import ParsedModule
from tools.recipes.objects import Frame, Unresolved
from tools.recipes.values import Evaluator

HINT_KEYWORDS = ("suite", "runner_config", "runner", "nightly_suite")
PATH_HINT = re.compile(r"(?<![a-z0-9])(\d+-gpu[\w-]*|amd|rocm|npu|ascend|xpu|cpu|h100|h200|h20|b200|b300|gb200|gb300|"
                       r"mi300x?|mi325x?|mi355x?|a100|l40s?)(?![a-z0-9])", re.I)


def hardware_hint(module: ParsedModule, ev: Evaluator) -> str | None:
    found: list[str] = []
    for stmt in module.tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call):
            continue
        name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
        if not name.startswith("register_") or not name.endswith("_ci"):
            continue
        platform = name[len("register_"):-len("_ci")]
        for keyword in call.keywords:
            if keyword.arg in HINT_KEYWORDS:
                value = ev.eval(keyword.value, Frame(module))
                if isinstance(value, str):
                    found.append(value if platform in value.lower() or platform == "cuda" else f"{platform}:{value}")
                elif not isinstance(value, Unresolved) and isinstance(value, list):
                    found.extend(str(v) for v in value if isinstance(v, str))
    if found:
        return ", ".join(dict.fromkeys(found))
    parts = module.rel.split("/")
    hints = [m.group(1) for part in parts for m in PATH_HINT.finditer(part.lower().replace("_", "-"))]
    return ", ".join(dict.fromkeys(h.lower() for h in hints)) or None
