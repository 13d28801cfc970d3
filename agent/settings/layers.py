"""Where the settings come from: command line > DSV4_* environment > config file > defaults.

``load_settings(cli_values)`` is the only place the layers meet. Each layer is a pydantic-settings
source (the environment and the TOML file parse values the way the library does); they are merged
here in order so that an error can name the layer a bad value came from. ``Settings(...)`` alone
(agent/settings/model.py) reads nothing but its arguments, so a recorded run (resume, replay) is never
changed by the environment of whoever replays it.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import EnvSettingsSource, InitSettingsSource
from pydantic_settings.exceptions import SettingsError as PydanticSettingsError

from agent.settings.model import ENV_PREFIX, Settings, SettingsError
from agent.settings.config_file import CONFIG_ENV, WORKING_FOLDER, ConfigFile, ConfigFileError, check_allowed, config_path, \
    parsed, read_config

__all__ = ["load_settings", "SettingsError"]


class _Environment(EnvSettingsSource):
    """``DSV4_*`` variables from a given mapping (the process environment unless a test passes one)."""

    def __init__(self, environ: Mapping[str, str]):
        self._environ = environ
        super().__init__(Settings, env_prefix=ENV_PREFIX)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items()}


def _openai_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The openai client's own variables, below the DSV4_* names."""
    names = {"llm_base_url": "OPENAI_BASE_URL", "llm_api_key": "OPENAI_API_KEY"}
    return {field: environ[name] for field, name in names.items() if environ.get(name)}


def _from_file(path: Path, how: str) -> tuple[dict[str, Any], ConfigFile | None]:
    if how == WORKING_FOLDER and not os.path.lexists(path):
        return {}, None
    if how != WORKING_FOLDER and not path.exists():
        raise SettingsError(f"config file {path} does not exist; pass an existing TOML file to --config "
                            f"(or unset {CONFIG_ENV})")
    try:
        found = read_config(path, how)
        if how == WORKING_FOLDER:
            check_allowed(found)
        return parsed(found), found
    except ConfigFileError as err:
        raise SettingsError(str(err)) from None


def load_settings(cli: dict[str, Any] | None = None, cwd: Path | None = None,
                  environ: Mapping[str, str] | None = None, config: str | None = None,
                  flags: Mapping[str, str] | None = None) -> Settings:
    """Merge the layers, lowest first; a CLI value of None means 'not given' and does not override.

    ``config`` is the ``--config`` value; ``flags`` maps a setting to the option that sets it, so
    that an error about a command-line value names the option the user typed.
    """
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    path, how = config_path(config, cwd, environ)
    from_file, found = _from_file(path, how)
    cli_values = {k: v for k, v in (cli or {}).items() if v is not None}
    layers: list[tuple[str, dict[str, Any]]] = [
        (str(path), from_file),
        ("environment (OPENAI_*)", _openai_environment(environ)),
        ("environment", _environment_values(environ)),
        ("command line", InitSettingsSource(Settings, init_kwargs=cli_values)()),
    ]
    merged = {key: value for _where, layer in layers for key, value in layer.items()}
    origin = {key: where for where, layer in layers for key in layer}
    try:
        settings = Settings(**merged)
    except ValidationError as err:
        raise SettingsError(_explain(err, origin, flags or {})) from None
    settings._config_file = found
    return settings


def _environment_values(environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        return _Environment(environ)()
    except PydanticSettingsError as err:  # e.g. a value that does not decode
        raise SettingsError(f"environment: {err}") from None


_BOUNDS = {"less_than_equal": ("at most", "le"), "less_than": ("less than", "lt"),
           "greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt")}


def _explain(err: ValidationError, origin: dict[str, str], flags: Mapping[str, str]) -> str:
    first = err.errors()[0]
    key = str(first["loc"][0]) if first["loc"] else "?"
    where = origin.get(key, "defaults")
    hint = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
    bound = _BOUNDS.get(first["type"])
    if bound is not None:
        hint = f"takes {bound[0]} {first['ctx'][bound[1]]} (got {first['input']})"
    if where == "command line" and key in flags:
        return f"{flags[key]} {hint}"
    if where == "environment":
        return f"setting {key!r} from environment ({ENV_PREFIX}{key.upper()}): {hint}"
    return f"setting {key!r} from {where}: {hint}"
