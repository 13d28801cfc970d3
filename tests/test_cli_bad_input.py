"""Bad input to the CLI: one clear line, non-zero exit, nothing half-written."""
from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest

from tests.cli_helpers import agent, run_cli
from tests.messages import assert_finished_refused, assert_refusal


def test_help_teaches(tmp_path: Path):
    """How fast it answers is measured, beside a bare interpreter, by benchmarks/cli_startup.py."""
    out = agent("--help", cwd=tmp_path)
    assert out.returncode == 0 and 'dsv4-agent "enable MTP and tune kernels"' in out.stdout
    for sub in ("run", "resume", "status", "jobs"):
        assert sub in out.stdout
    run_help = agent("run", "--help", cwd=tmp_path)
    assert "--sglang-python" in run_help.stdout and "precedence" in run_help.stdout


def test_unknown_option(tmp_path: Path):
    out = agent("tune kernels", "--frobnicate", cwd=tmp_path)
    assert_refusal(out, "--frobnicate", "dsv4-agent run -h")
    assert not (tmp_path / "runs").exists()


def test_goal_without_any_capability_lists_what_the_playbook_can_do(tmp_path: Path):
    out = run_cli("make coffee", cwd=tmp_path)
    assert_refusal(out, "'coffee'", "enable MTP")
    assert not (tmp_path / "runs").exists()


def test_unwritable_runs_dir(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = run_cli("tune kernels", "--runs-dir", str(blocker / "runs"), cwd=tmp_path)
    assert_refusal(out, blocker / "runs", "--runs-dir")


def test_unknown_executor_leaves_no_run_behind(tmp_path: Path):
    out = run_cli("tune kernels", "--executor", "carrier-pigeon", cwd=tmp_path)
    assert_refusal(out, "carrier-pigeon", "local")
    runs = tmp_path / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []  # refused before a run folder (or runs/) was made


def test_bad_gpu_list(tmp_path: Path):
    out = run_cli("tune kernels", "--gpus", "zero", cwd=tmp_path)
    assert_refusal(out, "--gpus", "'zero'")


def test_resume_of_a_missing_run(tmp_path: Path):
    out = run_cli("resume", "nope", cwd=tmp_path)
    assert_refusal(out, "'nope'", "`dsv4-agent runs`")
    elsewhere = run_cli("status", "nope", "--runs-dir", "old runs", cwd=tmp_path)
    assert_refusal(elsewhere, "'nope'", "`dsv4-agent runs --runs-dir 'old runs'`")


NO_GPU = {"PATH": "/usr/bin:/bin"}  # no nvidia-smi: the campaign would plan for a target


def _refused_before_a_run(out, tmp_path: Path, *names: str) -> str:
    """A refusal (tests/messages.py) naming ``names``, and no run folder anywhere."""
    line = assert_refusal(out, *names)
    runs = tmp_path / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], list(runs.iterdir())
    return line


def test_an_sglang_path_that_does_not_exist_or_holds_no_sglang(tmp_path: Path):
    out = run_cli("tune kernels", "--sglang", str(tmp_path / "nowhere"), cwd=tmp_path, env=NO_GPU)
    _refused_before_a_run(out, tmp_path, f"--sglang {tmp_path / 'nowhere'}", "--sglang DIR")
    (tmp_path / "plain").mkdir()
    out = run_cli("enable MTP", "--sglang", str(tmp_path / "plain"), cwd=tmp_path, env=NO_GPU)
    _refused_before_a_run(out, tmp_path, f"--sglang {tmp_path / 'plain'}", "SGLang source", "--sglang PATH")


def _no_evidence_said(out, runs: Path, *words: str) -> None:
    """The run went on (baseline scripts, exit 0); the live lines, `status` and the report say why MTP is
    missing: what was searched and the fix."""
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    run = next(runs.glob("*"))
    status = run_cli("status", str(run), cwd=runs.parent)
    report = (run / "report.md").read_text()
    for word in ("the goal asks for MTP", "searched its launch recipes", *words):
        assert word in out.stdout + out.stderr and word in " ".join(status.stdout.split()), word
        assert word in report, word
    assert "No MTP evidence: the goal asks for MTP" in report  # said in the evidence section, not only the steps
    assert (run / "serve_baseline.sh").exists() and not (run / "serve_mtp.sh").exists()


def test_an_mtp_goal_for_a_model_without_speculative_evidence(tmp_path: Path, sglang_wheel_root: Path):
    """A model whose architecture nothing names is refused before a run; one whose architecture is known but
    has no speculative evidence goes on: that is the infer_mtp step's outcome, read in the research lane."""
    tree = ["--sglang", str(sglang_wheel_root)]
    out = run_cli("enable MTP", "--model", "nonsense/model", *tree, cwd=tmp_path, env=NO_GPU)
    _refused_before_a_run(out, tmp_path, "--model nonsense/model", "model class", "SGLang 0.5.23",
                          str(sglang_wheel_root), "--arch CLASS", "--model-path DIR", "without MTP")
    empty = tmp_path / "ckpt"
    empty.mkdir()
    out = run_cli("enable MTP", "--model", "nonsense/model", "--model-path", str(empty), *tree, cwd=tmp_path,
                  env=NO_GPU)
    _refused_before_a_run(out, tmp_path, f"--model-path {empty}", "config.json")
    known = run_cli("enable MTP", "--model", "nonsense/model", "--arch", "GPT2LMHeadModel", *tree,
                    "--runs-dir", "none", cwd=tmp_path, env=NO_GPU)
    _no_evidence_said(known, tmp_path / "none", "no speculative evidence for nonsense/model", "SGLang 0.5.23",
                      str(sglang_wheel_root))
    # the fixes it names work: the architecture given, or a goal without MTP
    arch = run_cli("enable MTP", "--model", "nonsense/model", "--arch", "DeepseekV4ForCausalLM", *tree,
                   "--runs-dir", "arch", cwd=tmp_path, env=NO_GPU)
    assert arch.returncode == 0, arch.stdout[-2000:] + arch.stderr
    assert "--speculative-algorithm" in next((tmp_path / "arch").glob("*/serve_mtp.sh")).read_text()
    other = run_cli("tune kernels", "--model", "nonsense/model", *tree, "--runs-dir", "other", cwd=tmp_path,
                    env=NO_GPU)
    assert other.returncode == 0, other.stdout[-2000:] + other.stderr


def test_mtp_steps_with_no_evidence_are_refused_after_the_gpu_check(tmp_path: Path, sglang_wheel_root: Path):
    """--mtp-steps is judged up front (on the GPUs just checked): with no algorithm in the evidence, exit 2."""
    out = run_cli("enable MTP", "--model", "nonsense/model", "--arch", "GPT2LMHeadModel", "--sglang",
                  str(sglang_wheel_root), "--mtp-steps", "2", cwd=tmp_path, env=NO_GPU)
    _refused_before_a_run(out, tmp_path, "--mtp-steps", "speculative algorithm", "evidence",
                          "nonsense/model")


@pytest.mark.parametrize("args, words", [
    (["--tp", "3"], ["--tp 3", "8 GPUs", "(1, 2, 4, 8)", "--target-gpus N"]),
    (["--tp", "4", "--target-gpus", "6"], ["--tp 4", "6 GPUs", "(1, 2, 3, 6)"]),
    (["--gpus", "-1"], ["--gpus", "0,1,2,3", "'-1'"]),
    (["--gpus", "0,,1"], ["--gpus", "'0,,1'", "empty entry"]),
    (["--concurrency", "1,x"], ["--concurrency", "1,8,16", "'x'"]),
    (["--concurrency", "0"], ["--concurrency", "1 or more", "0"]),
    (["--shapes", "4096"], ["--shapes", "N,K", "'4096'"]),
])
def test_bad_gpu_layouts_and_lists_in_plain_words(tmp_path: Path, args: list[str], words: list[str]):
    line = _refused_before_a_run(run_cli("tune kernels", *args, cwd=tmp_path, env=NO_GPU), tmp_path, *words)
    assert "got '" not in line  # the value is named once, not echoed twice


def _fake_run(tmp_path: Path, result: dict | None, trace: str) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-x"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "tune kernels", "settings": {}}))
    (run / "trace.jsonl").write_text(trace)
    if result is not None:
        (run / "result.json").write_text(json.dumps(result))
    return run


@pytest.mark.no_replay("a hand-made run folder with an empty trace")
def test_resume_of_a_finished_run_is_refused(tmp_path: Path):
    run = _fake_run(tmp_path, {"status": "finished", "summary": "ok"}, "")
    out = run_cli("resume", str(run), cwd=tmp_path)
    assert_finished_refused(out, run.name)


def test_resume_with_a_corrupt_trace_is_refused_and_nothing_changes(tmp_path: Path):
    good = '{"v": 1, "seq": %d, "type": "progress", "lane": "control", "t": 0, "mono": 0, "pid": 1, "message": "m"}\n'
    run = _fake_run(tmp_path, None, good % 0 + "garbage\n" + good % 2)
    before = sorted(p.name for p in run.iterdir())
    out = run_cli("resume", run.name, cwd=tmp_path)
    assert_refusal(out, "line 2", "JSON")
    assert sorted(p.name for p in run.iterdir() if p.name != ".lock") == before


def test_a_locked_run_cannot_be_driven_twice(tmp_path: Path):
    run = _fake_run(tmp_path, None, "")
    with open(run / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242")
        held.flush()
        out = agent("resume", "latest", cwd=tmp_path)
    assert_refusal(out, "pid 4242")


def test_status_and_jobs_of_a_missing_run(tmp_path: Path):
    for sub in ("status", "jobs"):
        out = run_cli(sub, "ghost", cwd=tmp_path)
        assert_refusal(out, "'ghost'", "`dsv4-agent runs`")


@pytest.mark.no_replay("a hand-made run folder with an empty trace")
def test_resume_with_a_bad_setting_names_it_and_changes_nothing(tmp_path: Path):
    run = _fake_run(tmp_path, {"status": "planned", "summary": "no GPU"}, "")
    bad = run_cli("resume", run.name, "--executor", "carrier-pigeon", cwd=tmp_path)
    assert_refusal(bad, "carrier-pigeon")
    assert (run / "result.json").exists()  # the planned result was not archived by a refused resume
    assert not list(run.glob("result.attempt-*"))
    zero = run_cli("resume", run.name, "--max-llm-steps", "0", cwd=tmp_path)
    assert_refusal(zero, "max_llm_steps", "0")


class _Ended(Exception):
    """What the patched os._exit raises: the process would have ended here."""


def test_a_refusal_while_a_background_import_runs_ends_without_the_interpreter_teardown(monkeypatch):
    """The interpreter's teardown under a daemon thread that is importing compiled extensions can abort
    the process with no message (SIGABRT: 2 in 240 `resume` refusals on a loaded machine, none in 360
    after this). So from the console script a command that ends while a background import runs ends
    with os._exit after its output is flushed; with nothing loading it exits as usual."""
    import threading

    from agent.campaign import preload
    from agent.commands import shared

    release = threading.Event()
    importing = threading.Thread(target=release.wait, daemon=True)
    monkeypatch.setattr(preload, "_GRAPH_PRELOAD", [importing])
    monkeypatch.setattr(shared, "_END_AT_ONCE", True)

    def ended(code):
        raise _Ended(code)

    monkeypatch.setattr(shared.os, "_exit", ended)
    importing.start()
    with pytest.raises(_Ended) as hard:
        shared.run_main(lambda **_: 2, None, None)
    assert hard.value.args == (2,)
    release.set()
    importing.join()
    with pytest.raises(SystemExit) as usual:
        shared.run_main(lambda **_: 2, None, None)
    assert usual.value.code == 2
