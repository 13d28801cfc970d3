"""Discovery boot and proof, end to end with doubles at the process boundary: a fake multi-GPU
machine (nvidia-smi double), the SGLang server double (it logs SGLang 0.5.23's block-FP8 config
lines for the shapes in DSV4_DOUBLE_FP8_SHAPES, against DSV4_DOUBLE_FP8_CONFIG_DIR) behind the
sglang-python double, and the tuning-script double in a fake checkout.

tune (discovery boot -> mine -> fan-out -> merge -> install) -> serve from the installed folder ->
``prove_run`` says what was loaded and the report renders it."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agent.steps.base import StepOutcome
from agent.steps.tune_kernels import run
from tests.cli_helpers import run_cli
from tests.tune_step_fixtures import NO_DEEPGEMM, SGLANG_PYTHON, discovery_step, double_env, fake_gpus, tune_context
from tests.tuning_fixtures import config_dir, make_checkout, triton_config
from tests.slowdown import limit
from tools.jobs import LocalExecutor
from tools.scripts.models import ServeVariant
from tools.measure.server import launch_server, stop_server
from tools.tuning.configs import config_file_name
from agent.report.sections import proof_section
from tools.tuning.prove import prove_run
from tools.tuning.shapes import mine_log

REPO = Path(__file__).resolve().parents[1]
MODEL_SHAPES = "4096,7168;7168,2048;3072,1536"  # what the "model" runs; 3072,1536 already has a config
EXISTING = config_file_name(3072, 1536, "NVIDIA H200")


def _model_env(monkeypatch, checkout, shapes=MODEL_SHAPES):
    """Process-boundary configuration of the server double: which GEMMs the model runs, where configs are."""
    monkeypatch.setenv("DSV4_DOUBLE_FP8_SHAPES", shapes)
    monkeypatch.setenv("DSV4_DOUBLE_FP8_CONFIG_DIR", str(config_dir(checkout)))
    monkeypatch.setenv("DSV4_DOUBLE_STARTUP_S", "0.1")


def test_the_double_logs_sglangs_own_config_lines(tmp_path, monkeypatch, sglang_wheel_root):
    checkout = make_checkout(tmp_path / "sglang", {EXISTING: {"1": triton_config(1)}})
    _model_env(monkeypatch, checkout)
    executor = LocalExecutor(tmp_path / "jobs")
    server = launch_server(executor, ServeVariant(name="plain", model_path="/m"), SGLANG_PYTHON, ready_timeout_s=30)
    stop_server(executor, server.key)
    log = Path(server.log_path).read_text()
    # The wording is SGLang's: both format strings of the real wheel's fp8_kernel.py match the double's lines.
    source = (sglang_wheel_root / "sglang/kernels/ops/gemm/fp8_kernel.py").read_text()
    assert 'f"Using configuration from {config_file_path} for W8A8 Block FP8 kernel."' in source
    assert '"Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! "' in source
    loaded = re.findall(r"Using configuration from (.+) for W8A8 Block FP8 kernel\.$", log, re.M)
    assert loaded == [str(config_dir(checkout).resolve() / EXISTING)]
    shapes, device = mine_log(log, "plain")
    assert [(s.n, s.k) for s in shapes] == [(4096, 7168), (7168, 2048)] and device == "NVIDIA_H200"


def test_discovery_boot_tunes_the_logged_shapes_and_the_proof_sees_them_loaded(tmp_path, monkeypatch):
    calls = double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang", {EXISTING: {"1": triton_config(1)}})
    _model_env(monkeypatch, checkout)
    ctx = tune_context(tmp_path, fake_gpus(2), checkout, shapes=[], sglang_python=SGLANG_PYTHON)
    outcome = run(ctx, discovery_step())
    assert outcome.status == "done" and outcome.reason == "tuned", outcome.summary
    jobs = {j.key: j for j in ctx.executor.jobs()}
    assert jobs["discovery"].kind == "discovery" and jobs["discovery"].status == "stopped"
    assert outcome.data["discovery"]["key"] == "discovery"
    assert sorted(s["source"] for s in outcome.data["shapes"]) == ["log:log.txt", "log:log.txt"]
    assert outcome.data["skipped_existing"] == {}  # the default-config warnings name only the missing shapes
    assert sorted(tuple(line.split()[:2]) for line in calls.read_text().splitlines()) == sorted(
        [("4096", "7168"), ("7168", "2048")] * 2)
    installed = sorted(outcome.data["installed"])
    assert [Path(p).name for p in installed] == sorted(config_file_name(n, k, "NVIDIA H200")
                                                       for n, k in [(4096, 7168), (7168, 2048)])

    # Re-running the step (a resumed run) boots nothing again and installs nothing twice.
    assert run(ctx, discovery_step()).status == "done" and [j.key for j in ctx.executor.jobs()].count("discovery") == 1

    # The benchmark's server starts after the install and reads the installed folder.
    server = launch_server(ctx.executor, ServeVariant(name="baseline", model_path="/m"), SGLANG_PYTHON,
                           ready_timeout_s=30)
    stop_server(ctx.executor, server.key)
    _benchmark_outcome(ctx, {"baseline": server.log_path})
    proof = prove_run(ctx.run.path)
    section = proof_section(proof, ctx.run.path)
    title, md, html = section.title, section.markdown(), section.html()
    assert title == "Kernel configs" and proof.all_loaded
    assert md.startswith("All 2 installed kernel configs were loaded by the benchmark servers.")
    assert all(f"| {Path(p).name} | baseline |" in md for p in installed)
    assert "Using configuration from" in md and "<table" in html and "[128, 128]" in html


def _benchmark_outcome(ctx, server_logs: dict[str, str]) -> None:
    """The benchmark step's outcome naming its servers' logs, written as the campaign writes it (agent/campaign/lanes.py)."""
    outcome = StepOutcome(kind="benchmark", status="done", summary="", data={"server_logs": server_logs})
    ctx.run.write_json("steps/benchmark.json", outcome.model_dump(mode="json"))


def test_proof_counts_only_servers_started_after_the_install_and_names_what_was_not_loaded(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    _model_env(monkeypatch, checkout, shapes="4096,7168;7168,2048")
    ctx = tune_context(tmp_path, fake_gpus(1), checkout, shapes=[], sglang_python=SGLANG_PYTHON)
    assert prove_run(ctx.run.path) is None  # nothing installed yet
    nothing = run_cli("tuning", "prove", str(ctx.run.path), cwd=tmp_path)
    assert nothing.returncode == 0 and "installed no kernel configs" in nothing.stdout
    assert run(ctx, discovery_step()).status == "done"
    discovery_log = str(ctx.executor.job_dir("discovery") / "log.txt")
    monkeypatch.setenv("DSV4_DOUBLE_FP8_SHAPES", "4096,7168")  # a server that runs only one of the two GEMMs
    server = launch_server(ctx.executor, ServeVariant(name="mtp", model_path="/m"), SGLANG_PYTHON, ready_timeout_s=30)
    stop_server(ctx.executor, server.key)
    _benchmark_outcome(ctx, {"baseline": discovery_log, "mtp": server.log_path})
    proof = prove_run(ctx.run.path)
    md = proof_section(proof, ctx.run.path).markdown()
    assert md.startswith("1 of 2 installed kernel configs were loaded") and not proof.all_loaded
    assert "Not loaded: " + config_file_name(7168, 2048, "NVIDIA H200") in md
    assert "- baseline: started before the install" in md  # its 'default config' lines predate our files
    assert "- mtp: partly loaded (1/2 loaded" in md
    cli = run_cli("tuning", "prove", str(ctx.run.path), cwd=tmp_path)
    assert cli.returncode == 1 and cli.stdout.startswith("1 of 2 installed kernel configs were loaded"), cli.stderr


def test_no_discovery_boot_when_the_triton_path_is_not_used_unless_forced(tmp_path, monkeypatch):
    checkout = make_checkout(tmp_path / "sglang")
    monkeypatch.setenv("DSV4_DOUBLE_STARTUP_S", "0.1")  # the "model" runs no Triton block-FP8 GEMM
    ctx = tune_context(tmp_path, fake_gpus(1), checkout, shapes=[], sglang_python=SGLANG_PYTHON)
    outcome = run(ctx, discovery_step(env={}))  # H200, DeepGEMM on by default
    assert outcome.status == "skipped" and outcome.reason == "not_engaged_no_discovery"
    assert "would find nothing to tune" in outcome.summary
    assert ctx.executor.jobs() == []
    (tmp_path / "f").mkdir()
    forced = tune_context(tmp_path / "f", fake_gpus(1), checkout, shapes=[], sglang_python=SGLANG_PYTHON, force_tune=True)
    outcome = run(forced, discovery_step(env={}))
    assert outcome.status == "skipped" and outcome.reason == "discovery_found_nothing"
    assert "looked up no W8A8 Block FP8 config" in outcome.summary
    assert [j.kind for j in forced.executor.jobs()] == ["discovery"]


def test_a_discovery_server_that_crashes_fails_the_step_and_the_next_run_boots_a_fresh_attempt(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    _model_env(monkeypatch, checkout, shapes="4096,7168")
    ctx = tune_context(tmp_path, fake_gpus(1), checkout, shapes=[], sglang_python=SGLANG_PYTHON)
    crashed = run(ctx, discovery_step(env={**NO_DEEPGEMM, "DSV4_DOUBLE_EXIT_AT_START": "3"}))
    assert crashed.status == "failed" and crashed.reason == "discovery_failed"
    assert "discovery boot (job discovery) failed" in crashed.summary
    assert "CUDA out of memory (simulated" in crashed.summary and "--shapes" in crashed.summary
    fixed = run(ctx, discovery_step())
    assert fixed.status == "done", fixed.summary
    assert fixed.data["discovery"]["key"] == "discovery-2"


AGENT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from tests.tune_step_fixtures import SGLANG_PYTHON, discovery_step, tune_context
    from tests.tuning_fixtures import NVIDIA_SMI_DOUBLE
    from tools.gpus import DetectGpusArgs, detect_gpus
    from agent.steps.tune_kernels import run
    gpus = detect_gpus(DetectGpusArgs(nvidia_smi=str(NVIDIA_SMI_DOUBLE))).gpus
    run(tune_context(Path({tmp!r}), gpus, Path({checkout!r}), shapes=[], sglang_python=SGLANG_PYTHON), discovery_step())
""")


def test_agent_killed_during_discovery_reattaches_to_the_same_server(tmp_path, monkeypatch):
    double_env(monkeypatch, tmp_path)
    checkout = make_checkout(tmp_path / "sglang")
    _model_env(monkeypatch, checkout, shapes="4096,7168")
    loaded = tmp_path / "loaded"  # the server binds its port only once it exists: still loading when the agent dies
    monkeypatch.setenv("DSV4_DOUBLE_BIND_AFTER_FILE", str(loaded))
    agent = subprocess.Popen([sys.executable, "-c", AGENT.format(repo=str(REPO), tmp=str(tmp_path), checkout=str(checkout))],
                             env={**os.environ, "DSV4_FAKE_GPUS": "1"}, start_new_session=True)
    launched = tmp_path / "run/jobs/discovery/wrapper.json"
    deadline = time.monotonic() + limit(30)
    while time.monotonic() < deadline and not launched.exists() and agent.poll() is None:
        time.sleep(0.05)
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    assert launched.exists() and not (tmp_path / "run/tuning/discovery.json").exists()
    loaded.touch()
    ctx = tune_context(tmp_path, fake_gpus(1), checkout, shapes=[], sglang_python=SGLANG_PYTHON)
    outcome = run(ctx, discovery_step())
    assert outcome.status == "done", outcome.summary
    assert outcome.data["discovery"]["attached"] is True and outcome.data["discovery"]["key"] == "discovery"
    assert [j.key for j in ctx.executor.jobs() if j.kind == "discovery"] == ["discovery"]
