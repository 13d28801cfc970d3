"""The tune_kernels step end to end with a fake 4-GPU machine (nvidia-smi double) and the
tuning-script double in a fake checkout: fan-out, per-GPU save paths, merge, install, retry,
resume after the agent is killed, uninstall, and the no-GPU and wheel-only cases."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from agent.steps.base import PlanStep
from agent.steps.tune_kernels import run
from agent.run.trace import iter_events
from tests.tune_step_fixtures import TUNE_STEP, double_env, fake_gpus, tune_context
from tests.tuning_fixtures import config_dir, make_checkout, triton_config
from tests.campaign_fixtures import hold_tuning
from tests.slowdown import wait_for
from tools.jobs import LocalExecutor
from tools.tuning.configs import config_file_name
from tools.tuning.install import uninstall_configs

REPO = Path(__file__).resolve().parents[1]
EXISTING = config_file_name(3072, 1536, "NVIDIA H200")


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_fan_out_merge_install_prove_and_uninstall(tmp_path, monkeypatch):
    calls = double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang", {EXISTING: {"1": triton_config(1)}})
    before = _snapshot(config_dir(checkout))
    gpus = fake_gpus(4)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    ctx = tune_context(tmp_path, gpus, checkout, retune=False)
    outcome = run(ctx, TUNE_STEP)
    assert outcome.status == "done" and outcome.reason == "tuned", outcome.summary
    assert outcome.data["skipped_existing"] == {"3072,1536": str(config_dir(checkout) / EXISTING)}
    assert outcome.data["engaged"]["verdict"] == "engaged"
    # every (shape x M) unit ran exactly once, each on a single GPU of its own job
    lines = [l.split() for l in calls.read_text().splitlines()]
    assert sorted((n, k, m) for n, k, m, _ in lines) == sorted(
        (n, k, m) for n, k in [("4096", "7168"), ("7168", "2048")] for m in ("1", "16", "256"))
    assert {gpu for *_, gpu in lines} <= {"0", "1", "2", "3"} and len({gpu for *_, gpu in lines}) == 4
    assert len(list((ctx.run.path / "tuning/out").iterdir())) == 4  # a save path per process
    installed = [Path(p) for p in outcome.data["installed"]]
    assert sorted(p.name for p in installed) == sorted(config_file_name(n, k, "NVIDIA H200")
                                                       for n, k in [(4096, 7168), (7168, 2048)])
    assert all(sorted(json.loads(p.read_text()), key=int) == ["1", "16", "256"] for p in installed)
    manifest = json.loads((ctx.run.path / outcome.data["manifest"]).read_text())
    assert manifest["state"] == "installed" and all(e["backup"] is None for e in manifest["entries"])
    events = [e["type"] for e in iter_events(ctx.run.trace_path) if e["lane"] == "gpu"]
    assert events.count("job_launched") == 4 and events.count("job_finished") == 4 and "progress" in events

    # idempotent: running the step again re-attaches, re-runs nothing, installs nothing twice
    again = run(ctx, TUNE_STEP)
    assert again.status == "done" and len(calls.read_text().splitlines()) == 6

    result = uninstall_configs(ctx.run.path)
    assert sorted(result.removed) == sorted(str(p) for p in installed)
    assert _snapshot(config_dir(checkout)) == before


def test_retune_replaces_with_backup_and_uninstall_restores_exactly(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang", {EXISTING: {"1": triton_config(1)}})
    before = _snapshot(config_dir(checkout))
    ctx = tune_context(tmp_path, fake_gpus(2), checkout, retune=True, shapes=["3072,1536"])
    outcome = run(ctx, TUNE_STEP)
    assert outcome.status == "done", outcome.summary
    manifest = json.loads((ctx.run.path / "tuning/manifest.json").read_text())
    assert manifest["entries"][0]["backup"] == f"tuning/backup/{EXISTING}"
    assert _snapshot(config_dir(checkout)) != before
    cli = subprocess.run([sys.executable, "-c", "from agent.commands.cli import main; main()", "tuning", "uninstall",
                          str(ctx.run.path)], cwd=REPO, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert f"restored {config_dir(checkout).resolve() / EXISTING}" in cli.stdout
    assert _snapshot(config_dir(checkout)) == before


def test_a_crashed_job_is_retried_once_and_keeps_finished_units(tmp_path, monkeypatch):
    calls = double_env(monkeypatch, tmp_path)
    monkeypatch.setenv("DSV4_DOUBLE_CRASH_ONCE", str(tmp_path / "crashed"))
    checkout = make_checkout(tmp_path / "sglang")
    ctx = tune_context(tmp_path, fake_gpus(2), checkout)
    outcome = run(ctx, TUNE_STEP)
    assert outcome.status == "done", outcome.summary
    assert (tmp_path / "crashed").exists()
    retried = [j for j in outcome.data["jobs"] if len(j["keys"]) == 2]
    assert len(retried) == 1 and retried[0]["keys"][1] == retried[0]["keys"][0] + "-a2"
    units = [tuple(l.split()[:3]) for l in calls.read_text().splitlines()]
    assert len(units) == len(set(units)) == 9  # 3 shapes x 3 M, none tuned twice


def test_failing_twice_installs_nothing(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    script = checkout / "benchmark/kernels/quantization/tuning_block_wise_kernel.py"
    script.write_text(script.read_text().replace("    _maybe_crash()\n", "    raise RuntimeError('CUDA out of memory (double)')\n"))
    before = _snapshot(config_dir(checkout))
    ctx = tune_context(tmp_path, fake_gpus(1), checkout)
    outcome = run(ctx, TUNE_STEP)
    assert outcome.status == "failed" and outcome.reason == "tuning_jobs_failed"
    assert "after 2 attempt(s)" in outcome.summary and "Nothing was installed" in outcome.summary
    assert "`dsv4-agent resume RUN` tries again" in outcome.summary
    assert "CUDA out of memory" in json.dumps(outcome.data["log_tails"])
    assert _snapshot(config_dir(checkout)) == before and not (ctx.run.path / "tuning/manifest.json").exists()


AGENT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from tests.tune_step_fixtures import TUNE_STEP, tune_context
    from tests.tuning_fixtures import NVIDIA_SMI_DOUBLE
    from tools.gpus import DetectGpusArgs, detect_gpus
    from pathlib import Path
    from agent.steps.tune_kernels import run
    gpus = detect_gpus(DetectGpusArgs(nvidia_smi=str(NVIDIA_SMI_DOUBLE))).gpus
    run(tune_context(Path({tmp!r}), gpus, Path({checkout!r})), TUNE_STEP)
""")


def test_agent_killed_mid_tuning_resumes_by_reattaching(tmp_path, monkeypatch):
    calls = double_env(monkeypatch, tmp_path)
    copies = tmp_path / "copies"
    copies.mkdir()
    # both tuners are held inside their first unit until the agent is dead, however slow the machine
    hold_env, hold = hold_tuning(tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    env = {**os.environ, **hold_env, "DSV4_FAKE_GPUS": "2", "DSV4_DOUBLE_EXCLUSIVE": str(copies)}
    agent = subprocess.Popen([sys.executable, "-c", AGENT.format(repo=str(REPO), tmp=str(tmp_path), checkout=str(checkout))],
                             env=env, start_new_session=True)
    wait_for(lambda: len(list(copies.glob("*.lock"))) == 2, 60, "both tuners inside their first unit")
    agent.send_signal(signal.SIGKILL)  # the agent dies; its detached tuning jobs keep running
    agent.wait()
    assert not calls.exists()  # no unit finished yet
    hold.unlink()
    ctx = tune_context(tmp_path, fake_gpus(2), checkout)
    outcome = run(ctx, TUNE_STEP)
    assert outcome.status == "done", outcome.summary
    assert all(j["attached"] for j in outcome.data["jobs"])
    units = [tuple(l.split()[:3]) for l in calls.read_text().splitlines()]
    assert len(units) == len(set(units)) == 9  # nothing re-run
    assert not (copies / "overlaps.txt").exists()  # no second copy of a tuner beside the first


def test_without_gpus_the_step_plans_reviewable_scripts(tmp_path):
    checkout = make_checkout(tmp_path / "sglang")
    ctx = tune_context(tmp_path, [], checkout, gpus=[0, 1])
    outcome = run(ctx, PlanStep(kind="tune_kernels", lane="gpu", why="t", params={}))
    assert outcome.status == "planned" and outcome.reason == "no_gpu" and "no GPU here" in outcome.summary
    assert "bash " in outcome.summary and "tuning/tune_gpu1.sh" in outcome.summary
    assert outcome.data["scripts"] == {0: "tuning/tune_gpu0.sh", 1: "tuning/tune_gpu1.sh"}
    assert outcome.data["engaged"]["verdict"] == "unknown"  # no GPU: the architecture decides, said so
    assert (ctx.run.path / "tuning/tune_driver.py").exists() and not (ctx.run.path / "jobs").exists()


def test_h200_with_deepgemm_skips_tuning_unless_forced(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    ctx = tune_context(tmp_path, fake_gpus(1), checkout)
    outcome = run(ctx, PlanStep(kind="tune_kernels", lane="gpu", why="t", params={"batch_sizes": [1]}))
    assert outcome.status == "skipped" and outcome.reason == "not_engaged" and "--force-tune" in outcome.summary
    assert any("SGLANG_ENABLE_JIT_DEEPGEMM" in e for e in outcome.data["engaged"]["evidence"])


def test_wheel_source_without_the_script_explains_how_to_get_it(tmp_path, sglang_wheel_root):
    ctx = tune_context(tmp_path, fake_gpus(1), sglang_wheel_root, shapes=["12345,678"], force_tune=True)
    outcome = run(ctx, PlanStep(kind="tune_kernels", lane="gpu", why="t", params={"batch_sizes": [1]}))
    assert outcome.status == "skipped" and outcome.reason == "no_tuning_script"
    assert "git clone https://github.com/sgl-project/sglang" in outcome.summary
    assert (ctx.run.path / "tuning/plan.txt").exists()


def test_the_install_target_is_looked_up_once_a_job_runs_and_its_error_comes_where_it_is_used(tmp_path):
    """The lookup (it starts the server's interpreter) waits for the first launch, runs beside the jobs, and
    a lookup that fails raises at the install, as a lookup made there would."""
    import threading

    import pytest

    from tools.base import ToolError
    from tools.gpu_choice import choose_gpus
    from tools.gpus import DetectGpusResult
    from tools.tuning.outcome import TuneKernelsArgs
    from tools.tuning.tune_gpus import _install_target_meanwhile

    launched = threading.Event()
    plan = choose_gpus(DetectGpusResult(gpus=[]), wanted=None, tp=None).plan
    no_sglang = TuneKernelsArgs(model="m", sglang_python=sys.executable, gpu_plan=plan)  # this venv has no sglang
    target = _install_target_meanwhile(no_sglang, LocalExecutor(tmp_path / "jobs"), after=launched)
    assert not target.__self__.done()  # the future's result: nothing looked up before a job is launched
    launched.set()
    with pytest.raises(ToolError, match="has no sglang"):
        target()
    given = TuneKernelsArgs(model="m", sglang_python=sys.executable, config_dir=str(tmp_path / "configs"), gpu_plan=plan)
    found = _install_target_meanwhile(given, LocalExecutor(tmp_path / "jobs"), after=launched)
    assert found() == tmp_path / "configs"
