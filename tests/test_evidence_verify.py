"""SGLang itself resolves the recommended flags: the real sglang 0.5.23 from PyPI in its own venv
(``sglang_python``: made by .ci/run; skipped locally when absent, a failure under CI=true), run on
this CPU machine with a small, complete DeepSeek-V4 config.json the test writes (no weights).
The "not verified" paths need no SGLang. Two SGLang processes in all (each imports SGLang and
torch: about 14 s of CPU here): the CLI's, and the campaign's, which resolves more than its own argv."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agent.commands.mtp_table import print_answer
from agent.settings.layers import load_settings
from agent.run.folder import RunFolder
from agent.steps import verify_scripts
from agent.steps.base import PlanStep, StepContext
from agent.steps.infer_mtp import run as run_infer
from agent.steps.write_scripts import run as run_write_scripts
from agent.run.trace import TraceWriter
from tools.gpu_choice import choose_gpus
from tools.gpus import DetectGpusResult
from tools.jobs.factory import make_executor
from tools.mtp.infer import InferMtpArgs, MtpAnswer, infer_mtp
from tools.mtp.answer import Verification
from tools.mtp import verify as verify_module
from tools.mtp.verify import VerifyArgs, apply_verification, verify_flags

REPO = Path(__file__).resolve().parents[1]
CONFIG = Path(__file__).parent / "fixtures" / "verify" / "deepseek_v4_config.json"
DSV4 = "deepseek-ai/DeepSeek-V4-Flash"
# SGLang's import reads about 2 GB of the venv (torch's and CUDA's libraries, some 5,500 modules). With the
# files cold (after a reboot, or once the kernel reclaimed them) that took 83 s alone here and over 300 s
# beside the rest of the suite, pytest-timeout's default: the tests that start SGLang get longer.
COLD_SGLANG = pytest.mark.timeout(900)
EAGLE_314 = {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "3", "--speculative-eagle-topk": "1",
             "--speculative-num-draft-tokens": "4"}


def _checkpoint_in(parent: Path) -> Path:
    """A DeepSeek-V4 checkpoint folder holding only config.json: SGLang reads that and nothing else."""
    folder = parent / "DeepSeek-V4-Flash"
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG.read_text())
    return folder


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return _checkpoint_in(tmp_path)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "dsv4-agent"), *args], cwd=REPO, capture_output=True,
                          text=True)


@COLD_SGLANG
def test_mtp_verify_resolves_the_flagship_with_sglang(sglang_python, sglang_wheel_root, checkpoint):
    done = _cli("mtp", "--sglang", str(sglang_wheel_root), "--model", DSV4, "--model-path", str(checkpoint),
                "--sglang-python", str(sglang_python), "--verify", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    verification = answer["verification"]
    assert verification["status"] == "verified", verification
    assert verification["sglang_version"] == "0.5.23" and verification["seconds"] > 0
    assert verification["resolved"] == {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                        "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                                        "speculative_draft_model_path": str(checkpoint)}
    assert verification["argv"][:2] == ["--model-path", str(checkpoint)] and "--device" in verification["argv"]
    assert answer["recommended"]["flags"] == EAGLE_314
    assert "flags verified by SGLang 0.5.23" in answer["recommended"]["rationale"][-1]
    console = Console(record=True, width=120)
    print_answer(MtpAnswer.model_validate(answer), console)  # the table form of the same answer
    text = console.export_text()
    assert "Static reading vs SGLang's resolution" in text and "MISMATCH" not in text
    assert "flags verified by SGLang 0.5.23 at its release" in text


ADJUSTED = {**EAGLE_314, "--speculative-num-steps": "2", "--speculative-num-draft-tokens": "5"}
NEXTN = {"--speculative-algorithm": "NEXTN"}


def _context(tmp_path: Path, checkpoint: Path, python: str, sglang_src: Path) -> StepContext:
    settings = load_settings({"model": DSV4, "sglang_src": str(sglang_src), "model_path": str(checkpoint),
                              "sglang_python": python}, cwd=tmp_path, environ={})
    folder = RunFolder.create(tmp_path / "runs", "enable mtp")
    return StepContext(settings=settings, run=folder, trace=TraceWriter(folder.path / "trace.jsonl"),
                       executor=make_executor("local", tmp_path / "jobs"), gpus=[], sglang_root=None, lane="research",
                       gpu_plan=choose_gpus(DetectGpusResult(gpus=[]), wanted=None, tp=None).plan)


def _campaign_steps(ctx: StepContext):
    ctx.outcomes["infer_mtp"] = run_infer(ctx, PlanStep(kind="infer_mtp", lane="research", why="enable MTP"))
    return run_write_scripts(ctx, PlanStep(kind="write_scripts", lane="research", why="scripts"))


@dataclass
class VerifiedCampaign:
    checkpoint: Path
    ctx: StepContext
    summary: str
    others: list  # the verdicts of ADJUSTED and NEXTN, resolved first in the campaign's SGLang process


@pytest.fixture(scope="module")
def verified_campaign(sglang_python, sglang_wheel_root, tmp_path_factory) -> VerifiedCampaign:
    """The campaign's research steps with the real SGLang. Its one SGLang process also resolves, before
    the campaign's own argv, a request SGLang adjusts and one it refuses, as a campaign resolves its
    variants together: the campaign's verdict must come out as it does alone (the CLI test above)."""
    root = tmp_path_factory.mktemp("verify")
    checkpoint = _checkpoint_in(root)
    ctx = _context(root, checkpoint, str(sglang_python), sglang_wheel_root)
    real_verify_many, real_run = verify_scripts.verify_many, verify_module.run_grouped
    others, started = [], []

    def with_two_more_first(requests):
        more = [requests[0].model_copy(update={"flags": dict(flags)}) for flags in (ADJUSTED, NEXTN)]
        verdicts = real_verify_many(more + requests)
        others.extend(verdicts[:2])
        return verdicts[2:]

    def counted(argv, **kwargs):
        started.append(argv)
        return real_run(argv, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(verify_scripts, "verify_many", with_two_more_first)
        patch.setattr("tools.mtp.verify.run_grouped", counted)
        outcome = _campaign_steps(ctx)
    assert [argv[0] for argv in started].count(str(sglang_python)) == 1  # one SGLang process for all of them
    return VerifiedCampaign(checkpoint, ctx, outcome.summary, others)


@COLD_SGLANG
def test_the_campaign_verifies_the_exact_serve_argv_before_writing_scripts(verified_campaign):
    run = verified_campaign.ctx.run.path
    assert "mtp: flags verified by SGLang 0.5.23" in verified_campaign.summary
    recorded = json.loads((run / "verify" / "mtp.json").read_text())
    assert recorded["status"] == "verified" and "--tp-size" in recorded["argv"] and "--enable-metrics" in recorded["argv"]
    assert (run / "verify" / "verify_flags.py").read_text() == (REPO / "tools/mtp/verify_flags.py").read_text()
    script = (run / "serve_mtp.sh").read_text()
    assert "args+=(--speculative-num-draft-tokens 4)" in script


@COLD_SGLANG
def test_a_value_sglang_resolves_differently_is_flagged_and_the_resolved_one_used(verified_campaign):
    verification = verified_campaign.others[0]
    assert verification.status == "adjusted"
    assert verification.mismatches == ["--speculative-num-draft-tokens: 5 -> 3"]  # topk 1: steps + 1
    answer = infer_mtp(InferMtpArgs(sglang=None, model=DSV4, model_path=str(verified_campaign.checkpoint)))
    answer.recommended.flags = dict(ADJUSTED)
    applied = apply_verification(answer, verification).recommended
    assert applied.flags["--speculative-num-draft-tokens"] == "3"
    assert "static reading had 5" in applied.resolved_by["--speculative-num-draft-tokens"]


@COLD_SGLANG
def test_sglang_refuses_what_static_reading_lets_through(verified_campaign):
    """Static reading resolves NEXTN to EAGLE before the DeepSeek-V4 check; SGLang 0.5.23 checks first."""
    verification = verified_campaign.others[1]
    answer = infer_mtp(InferMtpArgs(sglang=None, model=DSV4, model_path=str(verified_campaign.checkpoint)))
    answer.recommended.flags = dict(NEXTN)
    assert verification.status == "rejected"
    assert "Only EAGLE and DSPARK speculative algorithms are supported" in verification.reason
    applied = apply_verification(answer, verification)
    assert applied.recommended is None and any("rejected by SGLang 0.5.23" in u for u in applied.unknowns)


@COLD_SGLANG
def test_requests_resolved_together_do_not_reach_each_other(verified_campaign):
    """The campaign's flagship, resolved after an adjusted and a refused request, gets the verdict the
    CLI test above gets alone."""
    checkpoint = verified_campaign.checkpoint
    flagship = Verification.model_validate_json((verified_campaign.ctx.run.path / "verify" / "mtp.json").read_text())
    assert flagship.status == "verified" and flagship.mismatches == []
    assert flagship.resolved.model_dump() == {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                                              "speculative_draft_model_path": str(checkpoint)}
    assert [v.argv[:2] for v in [*verified_campaign.others, flagship]] == [["--model-path", str(checkpoint)]] * 3


def test_not_verified_paths_say_why(tmp_path, checkpoint, sglang_wheel_root):
    flags = dict(EAGLE_314)
    cases = {
        "no --model-path": VerifyArgs(sglang_python=sys.executable, flags=flags),
        "no config.json in": VerifyArgs(sglang_python=sys.executable, model_path=str(tmp_path), flags=flags),
        "was not found": VerifyArgs(sglang_python=str(tmp_path / "nope" / "python"), model_path=str(checkpoint),
                                    flags=flags),
        "cannot be imported here": VerifyArgs(sglang_python=sys.executable, model_path=str(checkpoint), flags=flags),
    }
    for words, args in cases.items():
        verification = verify_flags(args)  # the agent's own venv has no sglang: the last case
        assert verification.status == "not_verified" and words in verification.reason, (words, verification.reason)
        assert verification.line().startswith("not verified: ")
    nothing = _cli("mtp", "--sglang", str(sglang_wheel_root), "--model", "nobody/unknown", "--verify", "--json")
    assert json.loads(nothing.stdout)["verification"]["reason"] == "nothing to verify: no recommendation"


def test_a_campaign_without_sglang_writes_the_scripts_and_says_not_verified(tmp_path, checkpoint, sglang_wheel_root):
    ctx = _context(tmp_path, checkpoint, sys.executable, sglang_wheel_root)
    outcome = _campaign_steps(ctx)
    assert "mtp: not verified: SGLang's argument resolution cannot be imported here" in outcome.summary
    assert json.loads((ctx.run.path / "verify" / "mtp.json").read_text())["status"] == "not_verified"
    assert "--speculative-algorithm EAGLE" in (ctx.run.path / "serve_mtp.sh").read_text()
