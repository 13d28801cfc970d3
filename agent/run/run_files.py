"""Where a run's files lie (spelled here only) and the one reader of them, typed (``RunFiles``).

One rule for every run file read here: a missing file is None (not written yet, or a step that never
ran); one that cannot be read or is not what the agent wrote is a ``RunFolderError`` naming the file and
the fix, never taken for missing. The agent writes run files atomically, so a bad one was damaged later.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tools import json_data

if TYPE_CHECKING:  # pydantic and the models load when a typed accessor is called: `status` and `runs` need neither
    from pydantic import BaseModel

    from agent.run.step_outcome import StepOutcome
    from tools.measure.verdict_models import Verdict
    from tools.mtp.answer import MtpAnswer
    from tools.scripts.models import MeasurePlan

CONFIG = "config.json"
PREFLIGHT = "preflight.json"
PLAN = "plan.json"               # the planned steps, a list of PlanStep
MTP_ANSWER = "mtp.json"          # the infer_mtp step's evidence answer (an MtpAnswer)
MEASURE_PLAN = "measure_plan.json"  # the write_scripts step's MeasurePlan
RESULT = "result.json"
STEPS = "steps"                  # steps/<kind>.json: each step's StepOutcome
Model = TypeVar("Model", bound="BaseModel")


def step_file(kind: str) -> str:
    """The outcome file of a step, relative to the run folder."""
    return f"{STEPS}/{kind}.json"


class RunFolderError(Exception):
    """A run folder problem the user can fix; the message says how."""


def damaged(path: Path, problem: str, fix: str = "") -> RunFolderError:
    """The one-line error for a run file that is there but is not what the agent wrote."""
    fix = fix or f"restore it, or move it away (`mv {shlex.quote(str(path))} {shlex.quote(f'{path}.bad')}`) and try again"
    return RunFolderError(f"{path} is {problem}; {fix}")


def read_run_json(path: Path, fix: str = "", shape: type = dict) -> Any:
    """The JSON in a run file, a ``shape`` (an object; plan.json holds a list): None when the file is not
    there, else ``damaged`` when it is not JSON of that shape."""
    try:
        text = json_data.read_text(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise damaged(path, f"unreadable ({getattr(err, 'strerror', None) or 'not UTF-8 text'})", fix) from None
    try:
        data = json_data.loads(text, path)
    except json_data.TooDeep:
        raise damaged(path, "nested too deeply to be data dsv4-agent wrote (damaged or crafted)", fix) from None
    except json.JSONDecodeError as err:
        raise damaged(path, f"not JSON ({err.msg} at line {err.lineno})", fix) from None
    if not isinstance(data, shape):
        wanted = "a JSON object" if shape is dict else f"a JSON {shape.__name__}"
        raise damaged(path, f"not {wanted} (a JSON {type(data).__name__})", fix)
    return data


def read_run_model(path: Path, model: type[Model], what: str, fix: str = "") -> Model | None:
    """A run file as ``model``: None when it is not there; ``damaged`` when it is no ``what``."""
    from pydantic import ValidationError

    data = read_run_json(path, fix)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the top level"
        raise damaged(path, f"not {what} ({where}: {first['msg']})", fix) from None


class RunFiles:
    """A run folder's files, read only; ``RunFolder`` (agent/run/folder.py) adds writing and the lock."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def json_object(self, relative: str) -> dict | None:
        """Any run file's JSON object by the one rule (None when missing), e.g. plan.json."""
        return read_run_json(self.path / relative)

    def step_outcome(self, kind: str) -> StepOutcome | None:
        """The outcome a step recorded, or None when it recorded none."""
        from agent.run.step_outcome import StepOutcome

        return read_run_model(self.path / step_file(kind), StepOutcome, "a step outcome")

    def step_outcomes(self) -> dict[str, StepOutcome]:
        """Every recorded outcome, by step kind, in the order of their names."""
        folder = self.path / STEPS
        kinds = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
        return {kind: outcome for kind in kinds if (outcome := self.step_outcome(kind)) is not None}

    def plan(self) -> list[dict] | None:
        """The planned steps (``PlanStep`` dumps: kind, lane, why, params), in order."""
        return read_run_json(self.path / PLAN, shape=list)

    def preflight(self) -> dict | None:
        """What preflight found (its model, ``Preflight``, lives with the campaign that makes it)."""
        return self.json_object(PREFLIGHT)

    def config(self) -> dict | None:
        return self.json_object(CONFIG)

    def mtp_answer(self) -> MtpAnswer | None:
        """The infer_mtp step's evidence answer."""
        from tools.mtp.answer import MtpAnswer  # its checkpoint and origin models: only for readers of it

        return read_run_model(self.path / MTP_ANSWER, MtpAnswer, "an MTP answer")

    def measure_plan(self) -> MeasurePlan | None:
        """What the benchmark measures: variants, concurrency levels, repeats, the accuracy gate."""
        from tools.scripts.models import MeasurePlan

        return read_run_model(self.path / MEASURE_PLAN, MeasurePlan, "a measure plan")

    def verdict(self) -> Verdict | None:
        """The benchmark step's decision, as it recorded it."""
        from tools.measure.decision import VERDICT_FILE
        from tools.measure.verdict_models import Verdict

        return read_run_model(self.path / VERDICT_FILE, Verdict, "a verdict")
