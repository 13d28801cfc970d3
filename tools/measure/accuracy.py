"""Accuracy gate: SGLang's own GSM8K few-shot check against each variant's server.

``python -m sglang.test.few_shot_gsm8k`` runs as a job against the server the benchmark used, and
its ``Accuracy:`` line is read from the log. Speculative decoding verifies every draft token with the
target model, so with greedy sampling it must not move accuracy: a variant below the baseline's 95 %
(Wilson) interval, or below baseline minus ``tolerance``, fails the gate and is never recommended.
Without ``--data-path`` SGLang would download the data set, so offline the gate is skipped, saying so.
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from tools.base import ToolError, cap_text
from tools.jobs import Executor, JobSpec
from tools.jobs.attempts import next_attempt
from tools.scripts.models import AccuracyPlan

CLIENT = "sglang.test.few_shot_gsm8k"
_ACCURACY = re.compile(r"^Accuracy:\s*([0-9.]+)\s*$", re.M)
_INVALID = re.compile(r"^Invalid:\s*([0-9.]+)\s*$", re.M)
Z95 = 1.959964


class AccuracyResult(BaseModel):
    variant: str
    accuracy: float | None = None
    invalid: float | None = None
    questions: int
    log: str = ""
    error: str | None = None


class GateResult(BaseModel):
    variant: str
    passed: bool | None = Field(description="None: not checked (skipped or no baseline figure)")
    reason: str


def offline_skip_reason(data_path: str | None, offline: bool) -> str | None:
    """Why the gate cannot run: offline (a local tokenizer, or HF_HUB_OFFLINE=1) with no data file."""
    if data_path or not offline:
        return None
    return ("offline (a local tokenizer is given, so the benchmark runs with HF_HUB_OFFLINE=1) and no "
            "--accuracy-data: SGLang's few_shot_gsm8k would download the GSM8K test set; pass "
            "--accuracy-data FILE (GSM8K test.jsonl) to gate accuracy")


def gate_status(plan: AccuracyPlan | None) -> str:
    """Whether the GSM8K gate runs, in one line for the plan, the console and the verdict."""
    if plan is None:
        return "GSM8K accuracy gate: not run (no variant to gate and no --accuracy-data)"
    if plan.skip_reason:
        return f"GSM8K accuracy gate SKIPPED: {plan.skip_reason}; the verdict does not vouch for accuracy"
    data = plan.data_path or "the GSM8K test set SGLang downloads"
    return (f"GSM8K accuracy gate: SGLang's few_shot_gsm8k, {plan.questions} questions of {data} per variant; "
            "a variant below the baseline's interval is never recommended")


def client_args(plan: AccuracyPlan, host: str, port: int | str) -> list[str]:
    """The argument list after the interpreter; ``--host`` is a bare address (0.5.23 adds the scheme)."""
    args = ["-m", CLIENT, "--num-questions", str(plan.questions), "--num-shots", str(plan.shots),
            "--parallel", str(plan.parallel), "--max-new-tokens", str(plan.max_new_tokens)]
    if plan.data_path:
        args += ["--data-path", plan.data_path]
    return args + ["--host", host, "--port", str(port)]


def result_file(results_dir: Path, variant: str) -> Path:
    return results_dir / "accuracy" / f"{variant}.json"


def parse_log(text: str) -> tuple[float | None, float | None]:
    acc, inv = _ACCURACY.findall(text), _INVALID.findall(text)
    return (float(acc[-1]) if acc else None), (float(inv[-1]) if inv else None)


def run_accuracy(executor: Executor, plan: AccuracyPlan, variant: str, python: str, host: str, port: int,
                 results_dir: Path, env: dict[str, str], cwd: str | None, timeout_s: float = 3600.0,
                 emit: Callable[[str, dict], None] | None = None) -> AccuracyResult:
    """Run the check as job ``gsm8k-<variant>`` (re-attached while it runs) and record its figure;
    ``emit`` hears the job's launch and finish (trace events), under the attempt's own key."""
    emit = emit or (lambda _type, _data: None)
    out = result_file(results_dir, variant)
    if out.exists():
        return AccuracyResult.model_validate_json(out.read_text())
    # The check is what it asks (variant, questions, shots, ...); the server's port is an attribute, so a
    # check cut short by a crash is tried again on the fresh server as a new attempt (tools/jobs/attempts.py).
    identity = {"accuracy": variant, **plan.model_dump(exclude={"data_path", "tolerance", "skip_reason"})}
    attempt = next_attempt(executor, f"gsm8k-{variant}", identity)
    key = attempt.key
    if attempt.verdict in ("launch", "attach"):
        launched = executor.launch(JobSpec(key=key, argv=[python, *client_args(plan, host, port)], kind="accuracy",
                                           lane="gpu", env=env, gpus=[], cwd=cwd, timeout_s=timeout_s, grace_s=5.0,
                                           identity=identity))
        emit("job_launched", {"key": key, "kind": "accuracy", "variant": variant, "gpus": [],
                              "attached": launched.attached, "attempt": attempt.number})
    while not (state := executor.poll(key)).done:
        time.sleep(0.3)
    text = executor.read_log(key, max_chars=20000)
    accuracy, invalid = parse_log(text)
    error = None
    if state.status != "succeeded" or accuracy is None:
        error = (f"few_shot_gsm8k {state.status}: {state.reason or 'no Accuracy line'}; log tail:\n"
                 f"{cap_text(text, 1500).text}")
    result = AccuracyResult(variant=variant, accuracy=accuracy, invalid=invalid, questions=plan.questions,
                            log=state.log_path, error=error)
    emit("job_finished", {"key": key, "kind": "accuracy", "status": "failed" if error else "succeeded",
                          "accuracy": accuracy})
    out.parent.mkdir(parents=True, exist_ok=True)  # recorded either way: the job of this key ran once
    out.write_text(result.model_dump_json(indent=2))
    return result


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (sound at 0 and 1, unlike p ± z·se)."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def gate(results: dict[str, AccuracyResult], plan: AccuracyPlan, baseline: str = "baseline") -> dict[str, GateResult]:
    """Pass/fail per variant against the baseline's accuracy."""
    if plan.skip_reason:
        return {v: GateResult(variant=v, passed=None, reason=f"not checked: {plan.skip_reason}") for v in results}
    base = results.get(baseline)
    if base is None or base.accuracy is None:
        why = base.error.splitlines()[0] if base and base.error else "the baseline has no accuracy figure"
        return {v: GateResult(variant=v, passed=None, reason=f"not checked: {why}") for v in results}
    if plan.tolerance is not None:
        low, rule = base.accuracy - plan.tolerance, f"baseline {base.accuracy:.3f} - tolerance {plan.tolerance:g}"
    else:
        low, high = wilson(base.accuracy, base.questions)
        rule = f"baseline {base.accuracy:.3f}, 95 % interval [{low:.3f}, {high:.3f}] over {base.questions} questions"
    if low <= 0:  # nothing scores below 0: every variant would pass, which says nothing
        why = (f"not checked: the gate cannot tell variants apart, as its lower bound is 0 ({rule}); no score can "
               "fall below it. Check that the model answers GSM8K (a real checkpoint, --accuracy-data), or ask "
               "for more --accuracy-questions")
        return {v: GateResult(variant=v, passed=None, reason=why) for v in results}
    out = {baseline: GateResult(variant=baseline, passed=True, reason=f"reference ({rule})")}
    for name, res in results.items():
        if name == baseline:
            continue
        if res.accuracy is None:
            out[name] = GateResult(variant=name, passed=False, reason="accuracy check failed: "
                                   + (res.error or "no figure").splitlines()[0])
        elif res.accuracy < low - 1e-9:
            out[name] = GateResult(variant=name, passed=False,
                                   reason=f"accuracy {res.accuracy:.3f} is below {low:.3f} ({rule})")
        else:
            out[name] = GateResult(variant=name, passed=True, reason=f"accuracy {res.accuracy:.3f} within {rule}")
    return out


def load_results(results_dir: Path) -> dict[str, AccuracyResult]:
    found: dict[str, AccuracyResult] = {}
    for path in sorted((results_dir / "accuracy").glob("*.json")):
        try:
            res = AccuracyResult.model_validate(json.loads(path.read_text()))
        except ValueError as err:
            raise ToolError(f"{path} is not an accuracy result ({err}); delete it to re-run the check") from None
        found[res.variant] = res
    return found
