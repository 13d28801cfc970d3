"""The tools the model may call, and their OpenAI schemas, built from the tools' pydantic ``Args``.

A ``Tool``'s ``Args`` model is its one schema source. The model gets an explicit allow-list of
read-only research tools; tools that change things are withheld with the reason, because their
arguments could carry flags or paths the flag guard never saw. **No shell tool exists.** Run context
(the SGLang root, the model path, ...) is bound by the agent: such fields leave the schema and are
filled in at dispatch.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any

from tools.base import Tool

# capability → (modules to look in, Tool names allowed there; None = every Tool of a research module)
CAPABILITIES: dict[str, tuple[tuple[str, ...], frozenset[str] | None]] = {
    "search": (("tools.source.search",), None),
    "bounded file read": (("tools.source.read",), None),
    "recipe extraction": (("tools.recipes",), None),
    "constraints": (("tools.constraints.extract",), None),
    "spec flag catalog": (("tools.source.spec_catalog",), None),
    "MTP inference": (("tools.mtp.infer",), None),
    "tuning plan": (("tools.tuning",), frozenset({"plan_kernel_tuning", "find_tuning_shapes",
                                                   "lookup_fp8_block_configs", "introspect_tuning_script",
                                                   "check_triton_fp8_engagement"})),
    "GPU detection": (("tools.gpus",), None),
}
# Capabilities the model reaches through plan steps, not direct calls (said in the report).
VIA_PLAN = {
    "typed launch of job kinds": "submit_plan steps tune_kernels / benchmark, run by the GPU lane",
    "script rendering": "submit_plan step write_scripts, with flags checked by the flag guard",
    "benchmark": "submit_plan step benchmark",
    "report": "written by the report node after the benchmark",
}
# Known tools that act on the world; never handed to the model.
WITHHELD = {
    "render_scripts": "writes scripts; its flags would bypass the flag guard (use step write_scripts)",
    "uninstall_kernel_configs": "changes the SGLang installation",
    "prove_kernel_configs_loaded": "reads arbitrary log paths; runs inside the tune_kernels step",
    "sync_upstream": "pulls a git checkout (use step sync)",
    "resolve_source": "the SGLang source is fixed by preflight",
}


_PATHLIKE = re.compile(r"(_path|_paths|_dir|_dirs|_file|_files|python|_bin|_binary|command|argv)$")


class RegistryError(Exception):
    """The tool set is unusable (duplicate names, missing descriptions); names the tool and the fix."""


@dataclass
class RegisteredTool:
    tool: Tool
    module: str
    capability: str
    bound: dict[str, Any]  # field → value set by the agent

    @property
    def name(self) -> str:
        return self.tool.name

    def description(self) -> str:
        return inspect.cleandoc(self.tool.args.__dict__.get("__doc__") or "")

    def schema(self) -> dict:
        params = self.tool.args.model_json_schema()
        for name in self.bound:
            params.get("properties", {}).pop(name, None)
        params["required"] = [r for r in params.get("required", []) if r not in self.bound]
        params.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.description(),
                                                 "parameters": params}}

    def arguments(self, raw: dict) -> dict:
        """The model's arguments with the bound fields forced to the agent's values."""
        return {**{k: v for k, v in raw.items() if k not in self.bound}, **self.bound}


@dataclass
class Registry:
    tools: dict[str, RegisteredTool] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)     # capability → why it is absent
    withheld: dict[str, str] = field(default_factory=dict)    # tool name → why the model does not get it

    def add(self, entry: RegisteredTool) -> None:
        if entry.name in self.tools:
            raise RegistryError(f"two tools are named {entry.name!r} ({self.tools[entry.name].module} and "
                                f"{entry.module}); rename one: the model calls tools by name")
        problems = []
        if not entry.description():
            problems.append(f"the Args class {entry.tool.args.__name__} has no docstring")
        for name, info in entry.tool.args.model_fields.items():
            if name not in entry.bound and not (info.description or "").strip():
                problems.append(f"field {name!r} has no description")
        if problems:
            raise RegistryError(f"tool {entry.name!r} ({entry.module}) cannot be offered to the model: "
                                f"{'; '.join(problems)}; add them (the model sees nothing else)")
        self.tools[entry.name] = entry

    def schemas(self) -> list[dict]:
        return [t.schema() for t in self.tools.values()]

    def report(self) -> dict:
        return {"tools": [{"name": t.name, "capability": t.capability, "module": t.module,
                           "bound": sorted(t.bound)} for t in self.tools.values()],
                "via_plan": VIA_PLAN, "withheld": self.withheld, "missing": self.missing}


def _modules(name: str) -> list[str] | None:
    """The module and, for a package, its submodules; None when it does not exist."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None
    if spec is None:
        return None
    names = [name]
    if spec.submodule_search_locations:
        names += [f"{name}.{m.name}" for m in pkgutil.iter_modules(spec.submodule_search_locations)]
    return names


def _tools_in(module_name: str) -> list[Tool]:
    module = importlib.import_module(module_name)
    return [v for v in vars(module).values() if isinstance(v, Tool)]


def _bind(tool: Tool, bindings: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Bound values for this tool's fields, or why it cannot be bound (a required value unknown,
    or a path/interpreter field the agent has no binding for: the model never picks those)."""
    bound: dict[str, Any] = {}
    for name, info in tool.args.model_fields.items():
        if name not in bindings:
            if _PATHLIKE.search(name):
                return {}, f"its field {name!r} names a path or program and the agent has no binding for it"
            continue
        value = bindings[name]
        if value is None and info.is_required():
            return {}, f"needs {name}, which this run does not know"
        if value is not None:
            bound[name] = value
        else:
            bound[name] = info.get_default(call_default_factory=True)
    return bound, None


def build_registry(bindings: dict[str, Any], extra_tools: list[tuple[str, Tool]] = (),
                   capabilities: dict = CAPABILITIES) -> Registry:
    """Registry of the allowed tools that exist; ``extra_tools`` are agent-side (capability, Tool)."""
    registry = Registry(withheld=dict(WITHHELD))
    found: list[tuple[str, str, Tool]] = []
    for capability, (modules, allowed) in capabilities.items():
        present = False
        for module in modules:
            names = _modules(module)
            if names is None:
                continue
            for name in names:
                for tool in _tools_in(name):
                    present = True
                    if tool.name in WITHHELD:
                        registry.withheld[tool.name] = WITHHELD[tool.name]
                    elif allowed is None or tool.name in allowed:
                        found.append((capability, name, tool))
                    else:
                        registry.withheld[tool.name] = "not on the reviewed read-only list for the model"
        if not present:
            registry.missing[capability] = f"module {' / '.join(modules)} is not in this build (no Tool found)"
    found += [(capability, tool.run.__module__, tool) for capability, tool in extra_tools]
    for capability, module, tool in found:
        if any(t.tool is tool for t in registry.tools.values()):
            continue  # re-exported by a package __init__ and its submodule: the same object
        bound, problem = _bind(tool, bindings)
        if problem:
            registry.withheld[tool.name] = problem
            continue
        registry.add(RegisteredTool(tool=tool, module=module, capability=capability, bound=bound))
    return registry
