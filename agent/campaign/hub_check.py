"""Up front, before a GPU job: the benchmark's model and tokenizer must load on a host without the hub.

SGLang and its bench client load a hub id from the Hugging Face cache, or download it; a host that
cannot reach the hub makes every bench point fail after minutes of retries. So a run whose GPU jobs
run here, benchmarking a model given only as a hub id, checks that the id is in the local cache or
that the hub answers, and otherwise is refused in one line naming ``--model-path``/``--tokenizer``.
Jobs on another host (SSH, Slurm) are not checked here: their cache and network are that host's.
"""
from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

PROBE_TIMEOUT_S = 5.0  # one short question: a hub that does not answer in this is as good as absent here


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, as huggingface_hub finds it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached(repo_id: str) -> bool:
    """Whether the cache holds a snapshot of the model ``repo_id``."""
    snapshots = hub_cache() / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    try:
        return any(snapshots.iterdir())
    except OSError:
        return False


def hub_answers() -> tuple[bool, str]:
    """(whether the hub answers, its URL); ``HF_HUB_OFFLINE`` counts as no."""
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False, url
    try:
        urllib.request.urlopen(urllib.request.Request(url + "/api/whoami-v2", method="HEAD"), timeout=PROBE_TIMEOUT_S)
    except urllib.error.HTTPError:
        return True, url  # it answered (401 without a token is an answer)
    except (OSError, ValueError):
        return False, url
    return True, url


def benchmarks(goal: str, settings) -> bool:
    """Whether the run may benchmark: the playbook's plan says; an LLM's plan is not known yet (it may)."""
    if settings.llm_base_url:
        return True
    from agent.campaign.playbook import GoalError, plan_goal

    try:
        return any(step.kind == "benchmark" for step in plan_goal(goal, pull=settings.pull)[0])
    except GoalError:
        return False


def unreachable_model(settings, checked, goal: str) -> str | None:
    """The refusal for a benchmark here whose model or tokenizer is a hub id this host cannot load, or None."""
    if checked is None or not checked.gpus or settings.plan_only or settings.executor.kind != "local" \
            or not benchmarks(goal, settings):
        return None
    wanted = {option: name for option, name in (("--model-path DIR", settings.model_path or settings.model),
                                                ("--tokenizer DIR", settings.tokenizer or settings.model_path
                                                 or settings.model)) if name and not Path(name).expanduser().is_dir()}
    missing = {option: name for option, name in wanted.items() if not cached(name)}
    if not missing:
        return None
    answers, url = hub_answers()
    if answers:
        return None
    names = " and ".join(sorted(set(missing.values())))
    return (f"{names} is neither a folder here nor in the Hugging Face cache ({hub_cache()}), and the hub ({url}) "
            f"cannot be reached from this host: pass {' and '.join(missing)} with the checkpoint's local folder")
