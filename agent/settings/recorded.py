"""Settings read back from a run folder, and the user's allowance of one.

A run folder is data anyone may have written: ssh options (which can run commands here) and
secrets (never recorded) come from the user again when a run is resumed or inspected, unless the
user allowed the folder (``allow_run``; the agent allows the runs it makes). The whole rule for a
run's settings: agent/settings/of_run.py. ``CampaignError`` (a campaign could not start or resume) is
raised here and by ``agent.campaign.start_resume``. Light on imports: the quick read-only path uses it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from agent.secrets import MARK
from tools.base import ToolError
from tools.state_dir import state_dir


class CampaignError(Exception):
    """A campaign could not start or resume; the message says why and what to do."""


def _allow_record(digest: str) -> Path:
    return state_dir("allowed-runs") / f"{digest}.json"


def allow_run(run: Path) -> str:
    """Record the run folder's ``config.json`` (its bytes) as the user's; its SHA-256."""
    digest = hashlib.sha256((run / "config.json").read_bytes()).hexdigest()
    record = _allow_record(digest)
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run": str(run.resolve()), "sha256": digest, "allowed_at": time.time()}))
    os.replace(tmp, record)
    return digest


def vouch_for_run(run: Path) -> None:
    """The agent just wrote this ``config.json`` from the user's own settings: allow it. A state folder
    that cannot be written leaves it a stranger (a resume then asks for the settings, or an allow)."""
    with contextlib.suppress(ToolError, OSError):
        allow_run(run)


def deny_run(run: Path) -> bool:
    """Forget the allowance of the run folder's ``config.json`` as it is now; False when there was none."""
    try:
        _allow_record(hashlib.sha256((run / "config.json").read_bytes()).hexdigest()).unlink()
    except (FileNotFoundError, ToolError):
        return False
    return True


def run_allowed(config_bytes: bytes) -> bool:
    try:
        return _allow_record(hashlib.sha256(config_bytes).hexdigest()).is_file()
    except ToolError:
        return False


def endpoint_with_credentials(recorded: dict) -> dict:
    """The LLM endpoint for a resumed run: config.json holds it with its password redacted, so the
    full URL comes from the environment again (like the API key, it is never recorded)."""
    url = recorded.get("llm_base_url")
    if not url or MARK not in url:
        return {}
    again = os.environ.get("DSV4_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    if not again:
        raise CampaignError(f"this run's LLM endpoint {url} had a password, which is never recorded; set "
                            "DSV4_LLM_BASE_URL to the full URL to resume")
    return {"llm_base_url": again}


def host_path_options(settings_model) -> dict[str, str]:
    """Each setting marked ``host_path`` (agent/settings/setting_field.py), in their rank's order, with the option
    that gives it (``--sglang DIR``). Takes the model, not an import of it: the quick path reads this module."""
    marked = sorted(settings_model.marked("host_path").items(), key=lambda item: item[1])
    fields = settings_model.model_fields
    return {name: "{flag} {metavar}".format(**fields[name].json_schema_extra) for name, _ in marked}


def missing_host_path(settings, overrides: dict) -> str | None:
    """A path setting that names nothing on this host, where the jobs run here or on a shared file
    system (a run planned elsewhere, a bundle): what to pass instead. Over SSH they are the host's."""
    if settings.executor.kind == "ssh":
        return None
    for field, option in host_path_options(type(settings)).items():
        value = getattr(settings, field)
        if value and not Path(value).expanduser().exists():
            whose = "does not exist" if overrides.get(field) else "(as the run recorded it) does not exist on this host"
            return f"{option.split()[0]} {value} {whose}; pass this host's with {option}"
    python = settings.sglang_python
    if not shutil.which(python):
        whose = "is not found" if overrides.get("sglang_python") else "(as the run recorded it) is not found on this host"
        return f"--sglang-python {python} {whose}; pass this host's interpreter with SGLang: --sglang-python PATH"
    return None
