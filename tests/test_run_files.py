"""The one reader of a run's files (agent/run/run_files.py): a missing file is None, a damaged one is
one line naming the file and the fix, in the accessors and in every command that reads it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.run.run_files import RunFiles, RunFolderError, step_file
from agent.run.step_outcome import StepOutcome
from tests.cli_helpers import run_cli
from tests.messages import assert_refusal
from tools.mtp.answer import MtpAnswer

GOLDEN = Path(__file__).parent / "golden" / "playbook-mtp-tune"
DAMAGE = [(b'{"kind": "sync", "status": "do', "not JSON (Unterminated string"),
          (b"\xff\xfe", "unreadable (not UTF-8 text)"), (b"[1, 2]", "not a JSON object (a JSON list)"),
          (b"[" * 100_000, "nested too deeply"), (b'{"kind": "sync", "status": "great", "summary": ""}', "not a step "
                                                  "outcome (status: Input should be 'done', 'planned', 'skipped' or 'failed')")]


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"  # not under runs/: a damaged copy is no run the suite replays
    shutil.copytree(GOLDEN, run)
    return run


def test_missing_files_are_none(tmp_path):
    run = RunFiles(tmp_path)
    assert run.step_outcome("sync") is None and run.step_outcomes() == {}
    assert (run.mtp_answer(), run.preflight(), run.config(), run.plan(), run.verdict(), run.measure_plan()) == \
        (None,) * 6


def test_the_golden_runs_files_read_typed():
    run = RunFiles(GOLDEN)
    outcomes = run.step_outcomes()
    assert outcomes and all(isinstance(o, StepOutcome) and o.kind == kind for kind, o in outcomes.items())
    assert run.step_outcome("infer_mtp") == outcomes["infer_mtp"]
    assert isinstance(run.mtp_answer(), MtpAnswer) and run.mtp_answer().model == run.config()["settings"]["model"]
    assert [step["kind"] for step in run.plan()] == [step["kind"] for step in json.loads((GOLDEN / "plan.json").read_text())]
    assert run.measure_plan().variants and run.preflight()["gpus"] is not None


@pytest.mark.parametrize("content, problem", DAMAGE)
def test_a_damaged_step_outcome_is_one_line_naming_it_and_the_fix(tmp_path, content, problem):
    run = _copy(tmp_path)
    path = run / step_file("infer_mtp")
    path.write_bytes(content.replace(b'"sync"', b'"infer_mtp"'))
    with pytest.raises(RunFolderError) as raised:
        RunFiles(run).step_outcome("infer_mtp")
    said = str(raised.value)
    assert said.startswith(f"{path} is ") and problem in said and "\n" not in said, said
    assert said.endswith(f"restore it, or move it away (`mv {path} {path}.bad`) and try again")
    with pytest.raises(RunFolderError, match="infer_mtp.json"):
        RunFiles(run).step_outcomes()  # every outcome by the same rule: none is skipped


def test_the_plan_is_a_list_and_the_rest_objects(tmp_path):
    run = _copy(tmp_path)
    (run / "plan.json").write_text('{"kind": "sync"}')
    (run / "preflight.json").write_text("[]")
    with pytest.raises(RunFolderError, match=r"plan.json is not a JSON list \(a JSON dict\)"):
        RunFiles(run).plan()
    with pytest.raises(RunFolderError, match=r"preflight.json is not a JSON object \(a JSON list\)"):
        RunFiles(run).preflight()


@pytest.mark.parametrize("command", ["status", "report", "replay"])
def test_a_command_says_a_damaged_step_outcome_in_one_line(tmp_path, command):
    run = _copy(tmp_path)
    path = run / step_file("benchmark")
    path.write_text('{"kind": "benchmark", "status": "do')
    done = run_cli(command, str(run), cwd=tmp_path)
    assert_refusal(done, path, "not JSON")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_command_says_a_damaged_mtp_json_in_one_line(tmp_path, command):
    run = _copy(tmp_path)
    answer = json.loads((run / "mtp.json").read_text())
    del answer["source"]
    (run / "mtp.json").write_text(json.dumps(answer))
    done = run_cli(command, *([str(GOLDEN)] if command == "compare" else []), str(run), cwd=tmp_path)
    assert_refusal(done, run / "mtp.json", "MTP answer", "source", "Field required",
                   f"mv {run / 'mtp.json'} {run / 'mtp.json'}.bad")


def test_a_damaged_review_gate_holds_until_the_changes_are_accepted(tmp_path):
    """A damaged changes.json never lifts the hand-off gate by itself (it used to read as no changes)."""
    from agent.campaign.handoff_review import PENDING, pending, review_gate
    from agent.run.folder import RunFolder

    run = RunFolder(_copy(tmp_path))
    (run.path / PENDING).write_text('{"changes": ["+ variant mtp: --speculative')
    with pytest.raises(RunFolderError) as raised:
        pending(run)
    assert str(raised.value).startswith(f"{run.path / PENDING} is not JSON (") and "--accept-changes" in str(raised.value)
    assert review_gate(run, None, accept_changes=True) is None and not (run.path / PENDING).exists()
    assert pending(run) is None
