"""``verify_flags``: have SGLang itself resolve a serve argv, and compare with what static reading says.

Static reading lags a tree that changes weekly (and cannot see the order SGLang runs its hooks
in); where SGLang is installed, its own argument resolution is the ground truth. The script
``verify_flags.py`` (standard library + SGLang, reviewable) is copied next to the results (the run
folder in a campaign) and run in the SGLang interpreter with the exact argv. Outcomes: verified
(same values), adjusted (SGLang resolves differently: the resolved values are the ones to use),
rejected (SGLang refuses the settings: its message), or not verified (why: no interpreter, no
config.json, SGLang not importable, a failure outside its argument checks, a timeout).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from tools.checkpoint.facts import CheckpointFacts
from tools.mtp.answer import MtpAnswer, Resolved, Verification
from tools.mtp.draft_layout import with_draft_layout
from tools.mtp.pick import ALGO, DRAFT, STEPS, TOKENS, TOPK
from tools.source.group_run import run_grouped
from tools.child_env import child_env

SCRIPT = Path(__file__).with_name("verify_flags.py")
MARKER = "DSV4_VERIFY "
TRIO_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
FLAG_OF = {"speculative_algorithm": ALGO, "speculative_num_steps": STEPS, "speculative_eagle_topk": TOPK,
           "speculative_num_draft_tokens": TOKENS, "speculative_draft_model_path": DRAFT}
# offline: resolution reads the local config.json; nothing may reach out to a model hub
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class VerifyArgs(BaseModel):
    """Resolve a server argv with SGLang's own argument pipeline (no weights loaded) and compare."""

    sglang_python: str = Field(description="Interpreter that has SGLang installed")
    model_path: str | None = Field(None, description="Checkpoint folder whose config.json SGLang reads")
    flags: dict[str, str] = Field(default_factory=dict, description="The recommended flags ('' for a switch)")
    extra_argv: list[str] = Field(default_factory=list, description="More of the serve argv, as written")
    script_dir: str | None = Field(None, description="Where to keep the script and its output (run folder)")
    timeout_s: float = Field(600, gt=0, description="How long resolution may take")
    checkpoint: CheckpointFacts | None = Field(None, description="The checkpoint's facts, to check the draft layout")


def static_of(flags: dict[str, str]) -> Resolved:
    def number(flag: str) -> int | None:
        return int(flags[flag]) if flags.get(flag, "").isdigit() else None

    return Resolved(speculative_algorithm=flags.get(ALGO), speculative_num_steps=number(STEPS),
                    speculative_eagle_topk=number(TOPK), speculative_num_draft_tokens=number(TOKENS),
                    speculative_draft_model_path=flags.get(DRAFT))


def argv_of(model_path: str, flags: dict[str, str], extra: list[str]) -> list[str]:
    words = ["--model-path", model_path]
    for flag, value in flags.items():
        words += [flag] if value == "" else [flag, value]
    return words + list(extra)


def _not_verified(reason: str, python: str, argv: list[str] | None = None) -> Verification:
    return Verification(status="not_verified", reason=reason, python=python, argv=argv or [])


def _python_missing(python: str) -> str | None:
    """Why ``python`` cannot be started, told apart: not there, or there but not a program."""
    if os.sep not in python:
        return None if shutil.which(python) else (f"the SGLang interpreter {python!r} was not found on PATH "
                                                  "(pass --sglang-python PATH)")
    path = Path(python)
    if not path.exists():
        return f"the SGLang interpreter {python!r} was not found (pass --sglang-python PATH)"
    if path.is_dir() or not os.access(path, os.X_OK):
        what = "a folder" if path.is_dir() else "not executable"
        return (f"the SGLang interpreter {python!r} is {what} (chmod +x it, or pass --sglang-python PATH to the "
                "venv's bin/python)")
    return None


def verify_flags(args: VerifyArgs) -> Verification:
    return verify_many([args])[0]


def _refusal(args: VerifyArgs) -> Verification | None:
    """Why this request cannot reach SGLang at all, before any process starts."""
    python = args.sglang_python
    if not args.model_path:
        return _not_verified("no --model-path: SGLang reads the checkpoint's config.json to resolve its "
                             "arguments (pass --model-path DIR with that file)", python)
    if not (Path(args.model_path).expanduser() / "config.json").is_file():
        return _not_verified(f"no config.json in {args.model_path}: SGLang needs the model's config to resolve "
                             "(pass --model-path to the checkpoint folder)", python)
    missing = _python_missing(python)
    return _not_verified(missing, python) if missing else None


def verify_many(requests: list[VerifyArgs]) -> list[Verification]:
    """Each request's verdict, in order. Requests for the same interpreter and folder share one SGLang
    process: importing SGLang (torch, its kernels) is most of a resolution's time, and resolving one
    more argv in the same process costs little."""
    verdicts: list[Verification | None] = [None] * len(requests)
    batches: dict[tuple[str, str | None, float], list[tuple[int, list[str]]]] = {}
    for at, args in enumerate(requests):
        verdicts[at] = _refusal(args)
        if verdicts[at] is None:
            argv = argv_of(str(Path(args.model_path).expanduser().resolve()), args.flags, args.extra_argv)
            batches.setdefault((args.sglang_python, args.script_dir, args.timeout_s), []).append((at, argv))
    for (python, script_dir, timeout), items in batches.items():
        with tempfile.TemporaryDirectory(prefix="dsv4-verify-") as scratch:
            folder = Path(script_dir) if script_dir else Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            script = folder / SCRIPT.name
            shutil.copyfile(SCRIPT, script)
            results = _run(python, script, [argv for _, argv in items], timeout, folder)
        for (at, argv), result in zip(items, results, strict=True):
            verdicts[at] = (_not_verified(result, python, argv) if isinstance(result, str)
                            else with_draft_layout(_compare(result, requests[at].flags, argv, python),
                                                   requests[at].checkpoint))
    return [v for v in verdicts if v is not None]  # every one is set by now


def _run(python: str, script: Path, argvs: list[list[str]], timeout: float, cwd: Path) -> list[dict | str]:
    """One result per argv: SGLang's (a dict) or why there is none (a string)."""
    env = child_env({**OFFLINE, "PYTHONDONTWRITEBYTECODE": "1"})
    request = argvs[0] if len(argvs) == 1 else argvs  # one argv is passed as it always was
    try:
        done = run_grouped([python, str(script), json.dumps(request)], timeout=timeout, env=env, cwd=cwd)
    except OSError as err:
        return [f"the SGLang interpreter {python!r} could not be started ({err.strerror})"] * len(argvs)
    if done.timed_out:
        return [f"SGLang's resolution did not finish within {timeout:g} s (its process group was killed; "
                "a cold import of SGLang can take minutes: raise --verify-timeout)"] * len(argvs)
    found: dict[int, dict | str] = {}
    for raw in done.stdout.splitlines():
        if raw.startswith(MARKER):
            try:
                result = json.loads(raw[len(MARKER):])
            except json.JSONDecodeError:
                continue
            if isinstance(result, dict) and isinstance(result.get("index", 0), int):
                found.setdefault(result.get("index", 0), result)
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
    gone = f"{python} exited {done.returncode} without a result: {tail[0][:300]}"
    return [found.get(at, gone) for at in range(len(argvs))]


def _commit(result: dict) -> str | None:
    if result.get("sglang_commit"):
        return result["sglang_commit"]
    location = result.get("sglang_location")
    if not location or not Path(location).is_dir():
        return None
    done = subprocess.run(["git", "-C", location, "rev-parse", "HEAD"], capture_output=True, text=True, env=child_env())
    return done.stdout.strip() or None if done.returncode == 0 else None


def _compare(result: dict, flags: dict[str, str], argv: list[str], python: str) -> Verification:
    common = {"python": python, "argv": result.get("argv") or argv, "sglang_version": result.get("sglang_version"),
              "sglang_commit": _commit(result), "seconds": result.get("seconds")}
    if result.get("status") == "rejected":
        return Verification(status="rejected", reason=result.get("reason", ""), static=static_of(flags), **common)
    if result.get("status") != "resolved":
        return Verification(status="not_verified", reason=result.get("reason") or "no resolution", **common)
    static = static_of(flags)
    resolved = Resolved.model_validate(result.get("resolved") or {})
    model_path = argv[argv.index("--model-path") + 1] if "--model-path" in argv else None
    mismatches, filled = [], []
    left_to_sglang = all(getattr(static, n) is None for n in TRIO_FIELDS)  # DSPARK: SGLang sets them itself
    for name in FLAG_OF:
        ours, theirs = getattr(static, name), getattr(resolved, name)
        if name == "speculative_draft_model_path" and ours is None and theirs in (None, model_path):
            continue  # no draft path given: SGLang falls back to the target checkpoint, as the hooks say
        if left_to_sglang and name in TRIO_FIELDS:
            filled += [f"{FLAG_OF[name]} {theirs}"] if theirs is not None else []
            continue
        if ours != theirs:
            mismatches.append(f"{FLAG_OF[name]}: {ours if ours is not None else '(unset)'} -> {theirs}")
    return Verification(status="adjusted" if mismatches else "verified", static=static, resolved=resolved,
                        mismatches=mismatches, filled=filled, **common)


def resolved_flags(flags: dict[str, str], verification: Verification) -> dict[str, str]:
    """The flags with SGLang's resolved values where it resolved them differently (scripts use these)."""
    if verification.status != "adjusted" or verification.resolved is None:
        return dict(flags)
    updated = dict(flags)
    for name, flag in FLAG_OF.items():
        value = getattr(verification.resolved, name)
        if name == "speculative_draft_model_path" or value is None:
            continue  # a resolved draft path is the fallback SGLang applies itself; never pinned in a script
        updated[flag] = str(value)
    return updated


def apply_verification(answer: MtpAnswer, verification: Verification) -> MtpAnswer:
    """Record SGLang's verdict in the answer. Rejected: nothing is recommended (SGLang's message says
    why). Adjusted: the recommended flags become the resolved values, each marked as SGLang's."""
    answer.verification = verification
    rec = answer.recommended
    if rec is None:
        return answer
    if verification.status == "rejected":
        answer.unknowns.append(f"{verification.line()}; nothing is recommended (static reading had "
                               f"{' '.join(f'{k} {v}'.strip() for k, v in rec.flags.items())})")
        answer.recommended = None
    elif verification.status == "adjusted":
        updated = resolved_flags(rec.flags, verification)
        who = f"SGLang {verification.sglang_version or '?'}'s own resolution"
        for flag, value in updated.items():
            if rec.flags.get(flag) != value:
                rec.resolved_by[flag] = f"{who} (static reading had {rec.flags.get(flag, 'nothing')})"
                rec.flag_origins.pop(flag, None)
        rec.rationale.append(f"{verification.line()}")
        rec.flags = updated
    else:
        rec.rationale.append(verification.line())
    return answer
