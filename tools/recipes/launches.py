"""Turn server-launch calls into recipes.

Each class whose own or inherited methods launch a server yields one recipe per launch, with
``cls`` bound to that class, so a subclass that only overrides ``model`` or ``spec_steps`` in
another file gets its own recipe with the inherited flags. Launches in module-level functions
yield recipes too.
"""
from __future__ import annotations

import ast
import contextlib
import itertools
from dataclasses import dataclass, field as dc_field
from typing import Any

from tools.source.origin import Origin
from tools.recipes.calls import interpret, launches_in
from tools.recipes.hardware import hardware_hint
from tools.recipes.model import Recipe
from tools.recipes.modules import ClassInfo, ParsedModule
from tools.recipes.objects import Branches, EnvInput, Frame, Unresolved, _Return, origin_of
from tools.recipes.values import Evaluator

# keyword names launchers and launch settings use for the same things
MODEL_KEYS = ("model", "model_path")
ARGS_KEYS = ("other_args", "extra_args")
ENV_KEYS = ("env", "env_vars")
SETUP = ("setUpClass", "setUp")
MAX_HARDWARE_TESTS = 2  # distinct hardware conditions per launch made into variants (2 -> 4 variants)
PARALLEL = {"tp": ("--tp", "--tp-size", "--tensor-parallel-size"),
            "dp": ("--dp", "--dp-size", "--data-parallel-size"),
            "ep": ("--ep", "--ep-size", "--expert-parallel-size")}


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [item for element in value for item in _flatten(element)]
    return [value]


@dataclass
class ParsedFlags:
    flags: dict[str, str] = dc_field(default_factory=dict)
    origins: dict[str, Origin] = dc_field(default_factory=dict)  # where each value was written
    unresolved: list[str] = dc_field(default_factory=list)       # every expression not resolved, as written
    unread: dict[str, str] = dc_field(default_factory=dict)      # flag -> the expression its value is
    needs: dict[str, str] = dc_field(default_factory=dict)       # flag -> environment variable, no default
    needs_origins: dict[str, Origin] = dc_field(default_factory=dict)


def parse_flags(items: list[Any], fallback: Origin) -> ParsedFlags:
    """``["--a", "1", "--b=2", "--switch"]`` -> flags with where each value was written. A value that is
    not a value (an unresolved expression, an environment input, an empty string) never becomes one."""
    out = ParsedFlags()
    items = _flatten(items)
    i = 0
    while i < len(items):
        item = items[i]
        if isinstance(item, Unresolved):
            out.unresolved.append(item.text)
            i += 1
            continue
        text = str(item)
        if not text.startswith("--"):
            i += 1
            continue
        if "=" in text:
            flag, value = text.split("=", 1)
            out.flags[flag], out.origins[flag] = value, origin_of(item) or fallback
            i += 1
            continue
        following = items[i + 1] if i + 1 < len(items) else None
        if following is not None and not (isinstance(following, str) and following.startswith("--")):
            if isinstance(following, EnvInput):
                out.needs[text] = following.env_name
                out.needs_origins[text] = following.origin or origin_of(item) or fallback
            elif isinstance(following, Unresolved):
                out.unresolved.append(following.text)
                out.unread[text] = following.text
            elif isinstance(following, str) and following == "":
                out.unread[text] = "'' (an empty value)"
            else:
                out.flags[text] = str(following)
                out.origins[text] = origin_of(following) or origin_of(item) or fallback
            i += 2
        else:
            out.flags[text], out.origins[text] = "", origin_of(item) or fallback
            i += 1
    return out


def _branches(value: Any, found: dict[str, None]) -> None:
    """The hardware conditions (``Branches``) inside a launch's arguments, in order."""
    if isinstance(value, Branches):
        found.setdefault(value.test)
        for side in (value.yes, value.no):
            _branches(side, found)
    elif isinstance(value, list):
        for item in value:
            _branches(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _branches(item, found)


def _choose(value: Any, picks: dict[str, bool]) -> Any:
    """``value`` with each hardware choice taken as ``picks`` says (a list branch is spliced in)."""
    if isinstance(value, Branches) and value.test in picks:
        return _choose(value.yes if picks[value.test] else value.no, picks)
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            chosen = _choose(item, picks)
            if isinstance(item, Branches) and item.test in picks and isinstance(chosen, list):
                out.extend(chosen)
            else:
                out.append(chosen)
        return out
    if isinstance(value, dict):
        return type(value)({k: _choose(v, picks) for k, v in value.items()})
    return value


def _condition(picks: dict[str, bool]) -> str:
    return " and ".join(test if holds else (f"not {test}" if test.endswith(")") and " " not in test
                                            else f"not ({test})") for test, holds in picks.items())


def _parallel(flags: dict[str, str]) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for key, names in PARALLEL.items():
        value = next((flags[n] for n in names if n in flags), None)
        found[key] = int(value) if value is not None and value.isdigit() else None
    return found


class RecipeBuilder:
    def __init__(self, ev: Evaluator):
        self.ev = ev

    def recipes(self, call: ast.Call, frame: Frame, name: str, origin: Origin, hardware: str | None) -> list[Recipe]:
        """One recipe per launch, or one per hardware branch when its arguments choose on the hardware."""
        kwargs: dict[str, Any] = {}
        for keyword in call.keywords:
            value = self.ev.eval(keyword.value, frame)
            if keyword.arg is None:
                if isinstance(value, dict):
                    kwargs.update({str(k): v for k, v in value.items()})
            else:
                kwargs[keyword.arg] = value
        positional = [self.ev.eval(a, frame) for a in call.args if not isinstance(a, ast.Starred)]
        tests: dict[str, None] = {}
        _branches([*kwargs.values(), *positional], tests)
        chosen = list(tests)[:MAX_HARDWARE_TESTS]  # more would multiply variants; the rest stay unresolved
        if not chosen:
            return [self._recipe(kwargs, positional, call, frame, name, origin, hardware, None)]
        found = []
        for values in itertools.product((True, False), repeat=len(chosen)):
            picks = dict(zip(chosen, values, strict=True))
            found.append(self._recipe(_choose(kwargs, picks), _choose(positional, picks), call, frame, name, origin,
                                      hardware, _condition(picks)))
        return found

    def _recipe(self, kwargs: dict[str, Any], positional: list[Any], call: ast.Call, frame: Frame, name: str,
                origin: Origin, hardware: str | None, condition: str | None) -> Recipe:
        model = next((kwargs[k] for k in MODEL_KEYS if k in kwargs), positional[0] if positional else None)
        launch = Origin(path=frame.module.rel, line=call.lineno)
        raw_args = next((kwargs[k] for k in ARGS_KEYS if k in kwargs), [])
        unresolved: list[str] = []
        if isinstance(raw_args, Unresolved):
            unresolved.append(raw_args.text)
            raw_args = []
        parsed = parse_flags(raw_args if isinstance(raw_args, list) else [], launch)
        flags = parsed.flags
        unresolved += parsed.unresolved
        env, env_origins, unread_env = self._env(next((kwargs[k] for k in ENV_KEYS if k in kwargs), None), launch,
                                                 unresolved)
        if isinstance(model, Unresolved):
            unresolved.append(model.text)
        parallel = _parallel(flags)
        tp_size = kwargs.get("tp_size")
        if parallel["tp"] is None and isinstance(tp_size, int) and not isinstance(tp_size, bool):
            parallel["tp"] = tp_size  # ModelLaunchSettings adds --tp tp_size itself
        variant = kwargs.get("variant")
        variant = str(variant) if isinstance(variant, str) else None
        label = ", ".join(v for v in (variant, condition) if v) or None
        return Recipe(name=f"{name}[{label}]" if label else name,
                      model=str(model) if isinstance(model, str) and model else None,
                      flags=flags, flag_origins=parsed.origins, env=env, env_origins=env_origins, hardware=hardware,
                      origin=origin, launch=launch, unresolved=unresolved, variant=label,
                      unread_flags=parsed.unread, unread_env=unread_env, needs=parsed.needs,
                      needs_origins=parsed.needs_origins, condition=condition, **parallel)

    @staticmethod
    def _env(value: Any, launch: Origin,
             unresolved: list[str]) -> tuple[dict[str, str], dict[str, Origin], dict[str, str]]:
        """(env, where each value is set, variables whose value is not a value: name -> expression)."""
        if isinstance(value, Unresolved):
            unresolved.append(value.text)
        if not isinstance(value, dict):
            return {}, {}, {}
        env: dict[str, str] = {}
        origins: dict[str, Origin] = {}
        unread: dict[str, str] = {}
        for key, item in value.items():
            if isinstance(key, Unresolved):
                continue
            if isinstance(item, Unresolved):
                unread[str(key)] = item.text
                unresolved.append(item.text)
                continue
            env[str(key)], origins[str(key)] = str(item), origin_of(item) or launch
        return env, origins, unread

    def from_module(self, module: ParsedModule) -> list[Recipe]:
        hardware = hardware_hint(module, self.ev)
        recipes: list[Recipe] = []
        for info in module.classes.values():
            recipes += self.from_class(info, module, hardware)
        for function in module.functions.values():
            if launches_in(function, module):
                recipes += self._run(function, Frame(module), f"{module.rel}::{function.name}",
                                     Origin(path=module.rel, line=function.lineno), hardware)
        top = [s for s in module.tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               and launches_in(s, module)]
        if top:  # launch settings listed at module level (MODELS = [ModelLaunchSettings(...), ...])
            module_body = ast.Module(body=top, type_ignores=[])
            ast.copy_location(module_body, top[0])
            recipes += self._run(module_body, Frame(module), f"{module.rel}::<module>",  # type: ignore[arg-type]
                                 Origin(path=module.rel, line=top[0].lineno), hardware)
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
                frame = Frame(owner.module, cls=info, owner=owner, names=self._class_setup(info, method_name))
                label = f"{module.rel}::{info.name}" + (f".{method_name}" if recipes else "")
                recipes += self._run(method, frame, label,
                                     Origin(path=module.rel, line=info.node.lineno), hardware)
        return recipes

    def _class_setup(self, info: ClassInfo, method_name: str) -> dict[str, Any]:
        """``cls.x = ...`` made by setUpClass/setUp, which a test method's launches read (``self.models``)."""
        names: dict[str, Any] = {}
        if method_name in SETUP:
            return names
        for setup in SETUP:
            owner = next((c for c in self.ev.mro(info) if setup in c.methods), None)
            if owner is None:
                continue
            frame = Frame(owner.module, cls=info, owner=owner, names=dict(names))
            with contextlib.suppress(_Return):
                interpret(self.ev, owner.methods[setup].body, frame, None)
            names.update({k: v for k, v in frame.names.items() if k.startswith(("cls.", "self."))})
        return names

    def _run(self, function: ast.FunctionDef, frame: Frame, name: str, origin: Origin,
             hardware: str | None) -> list[Recipe]:
        found: list[Recipe] = []

        def on_launch(call: ast.Call, at: Frame) -> None:
            label = name if not found else f"{name}#{len(found) + 1}"
            for recipe in self.recipes(call, at, label, origin, hardware):
                if recipe.variant:  # a named variant is its own name: path::Class[TP8+MTP]
                    recipe.name = f"{name}[{recipe.variant}]"
                found.append(recipe)

        with contextlib.suppress(_Return):  # the body returned after (or without) launching: what was found stands
            interpret(self.ev, function.body, frame, on_launch)
        return found
