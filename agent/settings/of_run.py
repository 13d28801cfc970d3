"""The settings of a recorded run, rebuilt in one place for every reader, and what a run folder may give back.

A run folder is data from whoever made it (a bundle, a colleague's run, a copy). The settings marked
``user_only`` in ``agent/settings/model.py`` name programs, hosts, ssh options, endpoints, credentials or
environment to pass; a run folder gives one back only where it equals what this user gives now
(options, ``DSV4_*`` environment, their config file) or the user has allowed the folder: runs this
user's agent made are allowed as it writes their ``config.json``, others with ``dsv4-agent config allow
RUN``. Like an allowed config file, the allowance is keyed by ``config.json``'s SHA-256 in the agent's
state folder, so a changed folder is a stranger again. Credentials are never read from a folder.
Recorded keys this build does not know are ignored and named (``RunSettings.dropped``).
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from agent.settings.model import ENV_PREFIX, Settings, SettingsError
from agent.settings.recorded import CampaignError, endpoint_with_credentials, run_allowed

Purpose = Literal["continue", "replay"]  # continue: resume, replay --rerun (jobs run); replay: offline, nothing runs


@dataclass(frozen=True)
class RunSettings:
    settings: Settings
    dropped: list[str] = field(default_factory=list)  # recorded keys this build does not know, ignored


def user_only_fields() -> dict[str, str]:
    """Each setting a run folder may not choose, and what it names (from the fields' metadata)."""
    return Settings.marked("user_only")


def known_settings(recorded: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The one rule for recorded keys: those this build knows, and the names of the others (ignored)."""
    known = {k: v for k, v in recorded.items() if k in Settings.model_fields}
    return known, sorted(set(recorded) - set(known))


def _option(name: str, value: Any) -> str:
    """How the user gives ``value`` for ``name``: the option, its environment variable, the config file."""
    extra = Settings.model_fields[name].json_schema_extra
    flag = (extra.get("flag") or "").split("/")[0]
    values = value if isinstance(value, list) else [value]
    given = " ".join(f"{flag}={shlex.quote(str(v))}" for v in values)
    return f"{given} (or {ENV_PREFIX}{name.upper()}, or {name.replace('_', '-')} in your config file)"


def _refusal(run: Path, name: str, what: str, recorded: Any, now: Any) -> str:
    return (f"{run.name}: setting {name} = {json.dumps(recorded)} names {what}, never taken from a run folder unless "
            f"you give the same now (you give {json.dumps(now)}). If it is yours, pass it again: "
            f"{_option(name, recorded)}; or allow the folder: `dsv4-agent config allow {shlex.quote(str(run))}`")


def validated(run: Path, values: dict[str, Any]) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        raise CampaignError(f"cannot use {run.name}: setting {first['loc'][0]!r}: "
                            f"{first['msg'].removeprefix('Value error, ')}") from None


def _public(value: Any) -> Any:
    """A value as the message shows it (an executor as its URL)."""
    return value if isinstance(value, (str, int, float, bool, list, type(None))) else str(value)


def user_now(given: Mapping[str, Any], environ: Mapping[str, str] | None) -> Settings:
    from agent.settings.layers import load_settings

    try:
        return load_settings(dict(given), environ=environ)
    except SettingsError as err:
        raise CampaignError(str(err)) from None


def settings_of_run(run: Path, given: Mapping[str, Any], purpose: Purpose,
                    environ: Mapping[str, str] | None = None) -> RunSettings:
    """The recorded run's settings for ``purpose``, with ``given`` (the values this command sets) on top.

    ``continue``: what jobs will run with; each ``user_only`` setting the folder holds must equal the
    user's own now or ask for nothing (or the folder be allowed); the key is the user's (so it equals
    theirs), ``plan_only`` is off.
    ``replay``: nothing runs, so the record's values stand; no key, jobs local."""
    raw = (run / "config.json").read_bytes()
    known, dropped = known_settings(recorded_settings(run, raw))
    if purpose == "replay":  # given: the values an earlier resume replaced, None included
        return RunSettings(validated(run, {**known, **given, "llm_api_key": None, "executor": "local"}), dropped)
    given = {k: v for k, v in given.items() if v is not None}  # an option left out gives nothing
    now = user_now(given, environ)
    key = now.llm_api_key.get_secret_value() if now.llm_api_key else None  # the user's, never the record's
    fixed = {"plan_only": False, "llm_api_key": key, **endpoint_with_credentials(known)}
    settings = validated(run, {**known, **fixed, **given})
    refuse_strangers(run, raw, settings, now, given, user_only_fields())
    settings.remember_secrets()
    return RunSettings(settings, dropped)


def refuse_strangers(run: Path, raw: bytes, chosen: Settings, now: Settings, given: Mapping[str, Any],
                     names: Mapping[str, str]) -> None:
    """Refuse the first of ``names`` (setting: what it names) that ``chosen`` takes from the folder
    (not ``given`` now) unequal to the user's own ``now``, unless the user allowed the folder (``raw``:
    its config.json)."""
    if run_allowed(raw):
        return
    for name, what in names.items():
        theirs, mine = getattr(chosen, name), getattr(now, name)
        # None or no entries asks for nothing (no endpoint, no options): a folder may choose less
        if name not in given and theirs not in (None, []) and theirs != mine:
            raise CampaignError(_refusal(run, name, what, _public(theirs), _public(mine)))


def recorded_settings(run: Path, raw: bytes) -> dict[str, Any]:
    """The settings ``config.json`` (``raw``) records, as a mapping; one line where it holds none."""
    try:
        recorded = json.loads(raw)["settings"]
    except (ValueError, KeyError, TypeError):
        raise CampaignError(f"{run / 'config.json'} holds no settings: not a dsv4-agent run folder") from None
    return recorded if isinstance(recorded, dict) else {}
