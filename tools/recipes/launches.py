"""Turn server-launch calls into recipes.

Each class whose own or inherited methods launch a server yields one recipe per launch, with
``cls`` bound to that class, so a subclass that only overrides ``model`` or ``spec_steps`` in
another file gets its own recipe with the inherited flags. Launches in module-level functions
yield recipes too.
"""
from __future__ import annotations

import ast
from typing import Any

from tools.source.origin import Origin
from tools.recipes.calls import interpret, launches_in
from tools.recipes.hardware import hardware_hint
from tools.recipes.model import Recipe
from tools.recipes.modules import ClassInfo, ParsedModule
from tools.recipes.values import Evaluator, Frame, Unresolved, _Return, origin_of

PARALLEL = {"tp": ("--tp", "--tp-size", "--tensor-parallel-size"),
            "dp": ("--dp", "--dp-size", "--data-parallel-size"),
            "ep": ("--ep", "--ep-size", "--expert-parallel-size")}


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [item for element in value for item in _flatten(element)]
    return [value]


def parse_flags(items: list[Any], fallback: Origin) -> tuple[dict[str, str], dict[str, Origin], list[str]]:
    """``["--a", "1", "--b=2", "--switch"]`` -> flags, where each value was written, unresolved parts."""
    flags: dict[str, str] = {}
    origins: dict[str, Origin] = {}
    unresolved: list[str] = []
    items = _flatten(items)
    i = 0
    while i < len(items):
        item = items[i]
        if isinstance(item, Unresolved):
            unresolved.append(item.text)
            i += 1
            continue
        text = str(item)
        if not text.startswith("--"):
            i += 1
            continue
        if "=" in text:
            flag, value = text.split("=", 1)
            flags[flag], origins[flag] = value, origin_of(item) or fallback
            i += 1
            continue
        following = items[i + 1] if i + 1 < len(items) else None
        if following is not None and not (isinstance(following, str) and following.startswith("--")):
            if isinstance(following, Unresolved):
                unresolved.append(following.text)
            flags[text] = str(following) if not isinstance(following, bool) else str(following)
            origins[text] = origin_of(following) or origin_of(item) or fallback
            i += 2
        else:
            flags[text], origins[text] = "", origin_of(item) or fallback
            i += 1
    return flags, origins, unresolved


def _parallel(flags: dict[str, str]) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for key, names in PARALLEL.items():
        value = next((flags[n] for n in names if n in flags), None)
        found[key] = int(value) if value is not None and value.isdigit() else None
    return found


class RecipeBuilder:
    def __init__(self, ev: Evaluator):
        self.ev = ev

    def recipe(self, call: ast.Call, frame: Frame, name: str, origin: Origin, hardware: str | None) -> Recipe:
        kwargs: dict[str, Any] = {}
        for keyword in call.keywords:
            value = self.ev.eval(keyword.value, frame)
            if keyword.arg is None:
                if isinstance(value, dict):
                    kwargs.update({str(k): v for k, v in value.items()})
            else:
                kwargs[keyword.arg] = value
        positional = [self.ev.eval(a, frame) for a in call.args if not isinstance(a, ast.Starred)]
        model = kwargs.get("model", positional[0] if positional else None)
        launch = Origin(path=frame.module.rel, line=call.lineno)
        raw_args = kwargs.get("other_args", [])
        unresolved: list[str] = []
        if isinstance(raw_args, Unresolved):
            unresolved.append(raw_args.text)
            raw_args = []
        flags, origins, missing = parse_flags(raw_args if isinstance(raw_args, list) else [], launch)
        unresolved += missing
        env_value = kwargs.get("env")
        env: dict[str, str] = {}
        if isinstance(env_value, dict):
            env = {str(k): str(v) for k, v in env_value.items() if not isinstance(k, Unresolved)}
        elif isinstance(env_value, Unresolved):
            unresolved.append(env_value.text)
        if isinstance(model, Unresolved):
            unresolved.append(model.text)
        return Recipe(name=name, model=str(model) if isinstance(model, str) and model else None,
                      flags=flags, flag_origins=origins, env=env, hardware=hardware, origin=origin,
                      launch=launch, unresolved=unresolved, **_parallel(flags))

    def from_module(self, module: ParsedModule) -> list[Recipe]:
        hardware = hardware_hint(module, self.ev)
        recipes: list[Recipe] = []
        for info in module.classes.values():
            recipes += self.from_class(info, module, hardware)
        for function in module.functions.values():
            if launches_in(function, module):
                recipes += self._run(function, Frame(module), f"{module.rel}::{function.name}",
                                     Origin(path=module.rel, line=function.lineno), hardware)
        return recipes

    def from_class(self, info: ClassInfo, module: ParsedModule, hardware: str | None) -> list[Recipe]:
        recipes: list[Recipe] = []
        seen: set[str] = set()
        for owner in self.ev.mro(info):
            for method_name, method in owner.methods.items():
                if method_name in seen:
                    continue  # overridden further down the hierarchy
                seen.add(method_name)
                if not launches_in(method, owner.module):
                    continue
                frame = Frame(owner.module, cls=info, owner=owner)
                label = f"{module.rel}::{info.name}" + (f".{method_name}" if recipes else "")
                recipes += self._run(method, frame, label,
                                     Origin(path=module.rel, line=info.node.lineno), hardware)
        return recipes

    def _run(self, function: ast.FunctionDef, frame: Frame, name: str, origin: Origin,
             hardware: str | None) -> list[Recipe]:
        found: list[Recipe] = []

        def on_launch(call: ast.Call, at: Frame) -> None:
            label = name if not found else f"{name}#{len(found) + 1}"
            found.append(self.recipe(call, at, label, origin, hardware))

        try:
            interpret(self.ev, function.body, frame, on_launch)
        except _Return:
            pass  # the body returned after (or without) launching: what was found stands
        return found
