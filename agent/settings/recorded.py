"""Settings read back from a run folder, and what is never taken from one.

A run folder is data anyone may have written: ssh options (which can run commands here) and
secrets (never recorded) come from the user again when a run is resumed or inspected.
``CampaignError`` (a campaign could not start or resume) is raised here and by ``agent.campaign.start_resume``.
"""
from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from agent.secrets import MARK


class CampaignError(Exception):
    """A campaign could not start or resume; the message says why and what to do."""


def ssh_options_for(recorded: dict, given: list[str] | None) -> list[str]:
    """The ssh options for a run read back from its folder: only what the user gives now.

    Options recorded in config.json are never used on their own: an option such as
    ``-oProxyCommand=...`` runs a command on this machine, and a run folder is data anyone may
    have written. A run recorded with options needs them passed again (``--ssh-option``).
    """
    if given is not None:
        return list(given)
    kept = list(recorded.get("ssh_options") or [])
    if kept and str(recorded.get("executor", "")).startswith("ssh://"):
        shown = " ".join(f"--ssh-option={shlex.quote(o)}" for o in kept)
        raise CampaignError(f"this run was made with ssh options {kept}; options are never taken from a run folder "
                            f"(they can run commands here). If they are yours, pass them again: {shown}")
    return []


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


HOST_PATHS = {"sglang_src": "--sglang DIR", "model_path": "--model-path DIR", "tokenizer": "--tokenizer DIR",
              "accuracy_data": "--accuracy-data FILE"}


def missing_host_path(settings, overrides: dict) -> str | None:
    """A path setting that names nothing on this host, where the jobs run here or on a shared file
    system (a run planned elsewhere, a bundle): what to pass instead. Over SSH they are the host's."""
    if settings.executor.kind == "ssh":
        return None
    for field, option in HOST_PATHS.items():
        value = getattr(settings, field)
        if value and not Path(value).expanduser().exists():
            whose = "does not exist" if overrides.get(field) else "(as the run recorded it) does not exist on this host"
            return f"{option.split()[0]} {value} {whose}; pass this host's with {option}"
    python = settings.sglang_python
    if not shutil.which(python):
        whose = "is not found" if overrides.get("sglang_python") else "(as the run recorded it) is not found on this host"
        return f"--sglang-python {python} {whose}; pass this host's interpreter with SGLang: --sglang-python PATH"
    return None
