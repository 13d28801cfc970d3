"""Server lifecycle, benchmark sweep and the two step adapters, against the SGLang server double
(``tests/doubles/sglang_server.py``) with SGLang's REAL bench client from the 0.5.23 wheel
(``tests/doubles/sglang_python`` + ``bench_client_shim.py``). The report is built from the run
folder the steps wrote and opened in headless Chromium."""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.settings.layers import load_settings
from agent.report.blocks import Para, Section
from agent.report.build import build_report
from agent.run.folder import RunFolder
from agent.steps import benchmark as benchmark_step
from agent.steps import write_scripts as write_scripts_step
from agent.steps.base import PlanStep, StepContext, StepOutcome
from agent.run.trace import TraceWriter, iter_events
from tests.conftest import require_binary
from tests.doubles.tokenizer import build_tokenizer
from tests.slowdown import limit
from tools.base import ToolError
from tools.gpu_choice import choose_gpus
from tools.gpus import DetectGpusResult, GpuInfo
from tools.jobs import LocalExecutor
from tools.measure.results import parse_jsonl
from tools.scripts import EnvChoice, FlagChoice, ServeVariant
from tools.measure.server import base_url, free_port, launch_server, probe_ready, stop_server

SGLANG_PYTHON = str(Path(__file__).parent / "doubles" / "sglang_python")
SMALL = {"input_len": 8, "output_len": 24, "prompts_per_concurrency": 2, "min_prompts": 4,
         "warmup_requests": 1, "ready_timeout_s": 30}
RECOMMENDED = {"flags": {"--speculative-algorithm": "EAGLE", "--speculative-num-steps": "2", "--tp": "8"},
               "env": {"SGLANG_ENABLE_SPEC_V2": "1"}, "rationale": ["DeepSeek-V4 accepts EAGLE with topk 1"],
               "origin": {"path": "sglang/srt/hook.py", "line": 1}, "flag_origins": {"--speculative-algorithm": {"path": "sglang/srt/hook.py", "line": 12}}}


def make_context(run_dir: Path, tok: Path, gpus: list[GpuInfo], recommended: dict | None) -> StepContext:
    settings = load_settings({"model_path": str(tok), "sglang_python": SGLANG_PYTHON, "concurrency": [1, 4],
                              "tokenizer": str(tok), "repeats": 1}, cwd=run_dir, environ={})
    run = RunFolder(run_dir)
    (run_dir / "config.json").write_text("{}")
    outcomes = {}
    if recommended is not None:
        settings_data = {"inputs": {"model": str(tok)}, "source": {"kind": "checkout", "root": str(run_dir), "version": None,
                                                                      "commit": None},
                         "architecture": "DeepseekV4ForCausalLM", "recommended": recommended,
                         "choices": [{"name": "mtp", "flags": recommended["flags"], "source": "recommended"}]}
        outcomes["infer_mtp"] = StepOutcome(kind="infer_mtp", status="done", summary="x",
                                            data={"settings": settings_data})
    return StepContext(settings=settings, run=run, trace=TraceWriter(run.trace_path),
                       executor=LocalExecutor(run.jobs_dir), gpus=gpus, sglang_root=None, outcomes=outcomes,
                       gpu_plan=choose_gpus(DetectGpusResult(gpus=gpus), wanted=None, tp=None).plan)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One campaign's write_scripts + benchmark steps, on a fake GPU list (the server is a double)."""
    root = tmp_path_factory.mktemp("measure")
    tok = build_tokenizer(root / "tok")
    run_dir = root / "run"
    run_dir.mkdir()
    ctx = make_context(run_dir, tok, [GpuInfo(index=0, name="NVIDIA H200", memory_mib=143771)], RECOMMENDED)
    step = PlanStep(kind="benchmark", lane="gpu", why="measure", params=SMALL)
    scripts = write_scripts_step.run(ctx, PlanStep(kind="write_scripts", lane="research", why="w", params=SMALL))
    with pytest.MonkeyPatch.context() as env:
        # 10 ms decode steps (not the double's 2 ms): a loaded machine's scheduling hiccups stay small
        # beside the work, so the TPOT comparison below measures decoding, not the machine's load.
        env.setenv("DSV4_DOUBLE_STEP_MS", "10")
        outcome = benchmark_step.run(ctx, step)
    return ctx, step, scripts, outcome


def test_write_scripts_step_uses_the_recommendation_with_citations(measured):
    ctx, _step, scripts, _ = measured
    assert scripts.status == "done" and scripts.reason == "scripts_written"
    assert set(scripts.data["variants"]) == {"baseline", "mtp"}
    assert scripts.data["scripts"] == ["serve_baseline.sh", "serve_mtp.sh", "run_measure.sh"]
    serve = (ctx.run.path / "serve_mtp.sh").read_text()
    assert "# sglang/srt/hook.py:12\nargs+=(--speculative-algorithm EAGLE)" in serve
    assert "without a citation" in serve  # --speculative-num-steps had no origin: said so
    assert "--tp 8" not in serve and "left to the script's own setting" in scripts.summary
    assert "export CUDA_VISIBLE_DEVICES=0" in serve and "export SGLANG_ENABLE_SPEC_V2=1" in serve


def test_benchmark_step_measures_every_point_with_the_real_client(measured):
    ctx, _step, _scripts, outcome = measured
    assert outcome.status == "done" and outcome.reason == "measured", outcome.summary
    assert sorted(outcome.data["done"]) == ["baseline-c1", "baseline-c4", "mtp-c1", "mtp-c4"]
    base = parse_jsonl(outcome.data["results"]["baseline"])
    mtp = parse_jsonl(outcome.data["results"]["mtp"])
    assert not base.problems and not mtp.problems
    assert [r.concurrency for r in base.records] == [1, 4]
    assert all(r.request_rate == float("inf") for r in base.records)  # the bare Infinity token
    assert all(r.accept_length is None for r in base.records)
    assert all(r.accept_length and 2.0 < r.accept_length <= 3.0 for r in mtp.records)
    # the double decodes 3 tokens per step with EAGLE: TPOT must drop clearly
    assert mtp.records[0].metrics["median_tpot_ms"] < 0.7 * base.records[0].metrics["median_tpot_ms"]
    assert "Uvicorn running" in Path(outcome.data["server_logs"]["mtp"]).read_text()
    states = {j.key: j.status for j in ctx.executor.jobs()}
    assert states["serve-baseline"] == "stopped" and states["serve-mtp"] == "stopped"
    kinds = {e["type"] for e in iter_events(ctx.run.trace_path) if e["lane"] == "gpu"}
    assert {"progress", "job_launched", "job_finished"} <= kinds


def test_benchmark_step_rerun_skips_finished_points(measured):
    ctx, step, _scripts, first = measured
    lines_before = Path(first.data["results"]["mtp"]).read_text().count("\n")
    again = benchmark_step.run(ctx, step)
    assert again.data["done"] == [] and len(again.data["skipped"]) == 4
    assert Path(first.data["results"]["mtp"]).read_text().count("\n") == lines_before


def test_report_from_the_run_folder_opens_in_chromium(measured, tmp_path):
    ctx, _step, _scripts, _ = measured
    chromium = require_binary("chromium")
    (ctx.run.path / "plan.md").write_text("# Plan\n\n1. write_scripts\n2. benchmark\n")
    outcome = StepOutcome(kind="benchmark", status="done", summary="4/4 points measured")
    ctx.run.write_json("steps/benchmark.json", outcome.model_dump(mode="json"))  # as the campaign writes it
    result = CliRunner().invoke(__import__("agent.commands.cli", fromlist=["app"]).app, ["report", str(ctx.run.path)])
    assert result.exit_code == 0, result.output
    paths = [Path(p) for p in result.output.split()]
    assert {p.name for p in paths} >= {"report.md", "report.html", "tpot_vs_concurrency.png",
                                       "throughput_vs_concurrency.png", "accept_length.png"}
    md = (ctx.run.path / "report.md").read_text()
    assert "| mtp | 4 |" in md and "## Plan" in md and "4/4 points measured" in md
    extra = build_report(ctx.run.path, extra_sections=[Section("Timeline", [Para("gpu lane <12 s>")], id="tl")])
    page = extra[1].read_text()
    assert '<section id="tl"><h2>Timeline</h2>\n<p>gpu lane &lt;12 s&gt;</p>' in page
    assert page.count('src="data:image/png;base64,') == 4  # TPOT, throughput, latency vs throughput, accept length
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", extra[1].as_uri()], capture_output=True, text=True,
                         timeout=limit(90)).stdout
    assert '<table id="comparison">' in dom and dom.count("<img") == 4
    subprocess.run([chromium, *flags, "--window-size=1300,2200", f"--screenshot={shot}", extra[1].as_uri()],
                   capture_output=True, timeout=limit(90), check=True)
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    colors = image.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50  # not blank
    # matplotlib's first two line colours (baseline blue, mtp orange) are on screen: the plots rendered
    pixels = set(image.get_flattened_data())
    near = lambda c: any(abs(p[0] - c[0]) < 12 and abs(p[1] - c[1]) < 12 and abs(p[2] - c[2]) < 12 for p in pixels)
    assert near((31, 119, 180)) and near((255, 127, 14))


def test_benchmark_step_without_gpus_is_planned(tmp_path):
    tok = build_tokenizer(tmp_path / "tok")
    (tmp_path / "run").mkdir()
    ctx = make_context(tmp_path / "run", tok, [], None)
    scripts = write_scripts_step.run(ctx, PlanStep(kind="write_scripts", lane="research", why="w"))
    assert scripts.data["scripts"] == ["serve_baseline.sh", "run_measure.sh"]
    outcome = benchmark_step.run(ctx, PlanStep(kind="benchmark", lane="gpu", why="b"))
    assert outcome.status == "planned" and outcome.reason == "no_gpu" and "run_measure.sh" in outcome.summary
    assert not (tmp_path / "run" / "jobs").exists()


def test_server_that_never_gets_ready_is_stopped_and_its_log_shown(tmp_path):
    ex = LocalExecutor(tmp_path / "jobs")
    variant = ServeVariant(name="slow", model_path="/m", env=[EnvChoice(name="DSV4_DOUBLE_NEVER_READY", value="1")])
    timeout_s = limit(3)  # long enough for the double to start and log, however slow the machine
    with pytest.raises(ToolError, match=rf"not ready .* after {timeout_s:g} s; it was stopped(.|\n)*Uvicorn running"):
        launch_server(ex, variant, SGLANG_PYTHON, ready_timeout_s=timeout_s)
    assert ex.poll("serve-slow").status == "stopped"


def test_server_crash_at_start_reports_the_log_tail(tmp_path):
    ex = LocalExecutor(tmp_path / "jobs")
    variant = ServeVariant(name="crash", model_path="/m", env=[EnvChoice(name="DSV4_DOUBLE_EXIT_AT_START", value="2")])
    with pytest.raises(ToolError, match=r"exited before it was ready \(failed: exit code 2: \[double\] RuntimeError: CUDA out "
                       r"of memory[^)]*\)(.|\n)*Log tail(.|\n)*CUDA out of memory"):
        launch_server(ex, variant, SGLANG_PYTHON, ready_timeout_s=20)


def test_port_in_use_is_refused_and_a_free_port_works(tmp_path):
    ex = LocalExecutor(tmp_path / "jobs")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ToolError, match=f"port {port} on 127.0.0.1 is already in use"):
            launch_server(ex, ServeVariant(name="p", model_path="/m"), SGLANG_PYTHON, port=port)
    handle = launch_server(ex, ServeVariant(name="q", model_path="/m"), SGLANG_PYTHON, port=free_port(),
                           ready_timeout_s=20)
    again = launch_server(ex, ServeVariant(name="q", model_path="/m"), SGLANG_PYTHON, ready_timeout_s=20)
    assert again.attached and again.port == handle.port  # a re-run re-attaches to the same server
    assert stop_server(ex, handle.key).status == "stopped"


def test_a_crashing_bench_client_is_a_failed_point_and_with_no_baseline_the_sweep_stops(tmp_path):
    from tools.measure.bench import run_sweep
    from tools.scripts import MeasurePlan

    tok = build_tokenizer(tmp_path / "tok")
    plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path=str(tok)),
                                 ServeVariant(name="other", model_path=str(tok))], concurrency=[1],
                       tokenizer=str(tmp_path / "missing-tokenizer"), input_len=4, output_len=4, min_prompts=2,
                       warmup_requests=0, ready_timeout_s=20)
    sweep = run_sweep(LocalExecutor(tmp_path / "jobs"), plan, SGLANG_PYTHON, tmp_path / "bench")
    assert [(f.variant, f.concurrency) for f in sweep.failures] == [("baseline", 1), ("other", 1)]
    assert "bench client failed: exit code" in sweep.failures[0].reason
    recorded = [json.loads(x) for x in (tmp_path / "bench" / "baseline.failures.jsonl").read_text().splitlines()]
    assert recorded[0]["concurrency"] == 1 and "bench client failed" in recorded[0]["reason"]
    # nothing could be compared with an unmeasured baseline: the other variant's server never starts
    other = [json.loads(x) for x in (tmp_path / "bench" / "other.failures.jsonl").read_text().splitlines()]
    assert other[0]["reason"].startswith("not measured: the baseline was not measured at concurrency 1")
    assert not (tmp_path / "jobs" / "serve-other").exists() and (tmp_path / "jobs" / "serve-baseline").exists()


def test_each_point_gets_its_own_accept_length_on_a_shared_server(tmp_path):
    """Two points on ONE server whose (double's) accept length changes between them: the client's
    cumulative figure mixes them, the snapshot difference gives each point its own value."""
    from tools.measure.bench import run_point
    from tools.scripts import MeasurePlan

    tok = build_tokenizer(tmp_path / "tok")
    accept_file = tmp_path / "accept"
    accept_file.write_text("4")
    variant = ServeVariant(name="mtp", model_path=str(tok), flags=[FlagChoice(flag="--speculative-algorithm",
                                                                               value="EAGLE")],
                           env=[EnvChoice(name="DSV4_DOUBLE_ACCEPT_LENGTH_FILE", value=str(accept_file))])
    plan = MeasurePlan(variants=[variant], concurrency=[1, 2], tokenizer=str(tok), input_len=4, output_len=24,
                       min_prompts=4, warmup_requests=1, ready_timeout_s=20)
    ex = LocalExecutor(tmp_path / "jobs")
    server = launch_server(ex, variant, SGLANG_PYTHON, ready_timeout_s=20)
    results = tmp_path / "bench" / "mtp.jsonl"
    results.parent.mkdir()
    try:
        for point, accept in zip(plan.points(), ("4", "2")):
            accept_file.write_text(accept)
            key, failure = run_point(ex, plan, variant, point, SGLANG_PYTHON, server, results, {}, 120)
            assert failure is None and key == f"bench-mtp-c{point.concurrency}"
    finally:
        stop_server(ex, server.key)
    first, second = parse_jsonl(results).records
    assert (first.accept_length, first.accept_method, first.accept_isolated) == (4.0, "counters", True)
    assert (second.accept_length, second.accept_method, second.accept_isolated) == (2.0, "counters", True)
    assert 2.2 < second.accept_length_cumulative < 3.9  # what the client reported: both points mixed
    snaps = [json.loads(x) for x in (tmp_path / "bench" / "snapshots" / "mtp.jsonl").read_text().splitlines()]
    assert [(s["tag"], s["phase"]) for s in snaps] == [("mtp-c1", "before"), ("mtp-c1", "after"),
                                                      ("mtp-c2", "before"), ("mtp-c2", "after")]


def test_without_metrics_a_later_point_is_flagged_not_isolated(tmp_path):
    """A server without /metrics (older build, or --enable-metrics dropped): the first point's average is
    its own, the second point's cannot be separated and is flagged instead of reported."""
    from tools.measure.accept_snapshots import snapshot_file, take_snapshot

    port = free_port()
    server = subprocess.Popen([SGLANG_PYTHON, "-m", "sglang.launch_server", "--model-path", "/m", "--port", str(port),
                               "--speculative-algorithm", "EAGLE"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = base_url("127.0.0.1", port)
        deadline = time.monotonic() + limit(20)
        while not probe_ready(url) and time.monotonic() < deadline:
            time.sleep(0.1)
        out = snapshot_file(tmp_path, "mtp")
        body = json.dumps({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 9}}).encode()
        for tag in ("mtp-c1", "mtp-c2"):
            take_snapshot(SGLANG_PYTHON, url, tag, "before", out)
            urllib.request.urlopen(url + "/generate", data=body, timeout=limit(10)).read()
            take_snapshot(SGLANG_PYTHON, url, tag, "after", out)
    finally:
        server.terminate()
        server.wait(limit(10))
    (tmp_path / "mtp.jsonl").write_text("".join(json.dumps({"tag": t, "median_tpot_ms": 1.0, "accept_length": 3.0})
                                                + "\n" for t in ("mtp-c1", "mtp-c2")))
    first, second = parse_jsonl(tmp_path / "mtp.jsonl").records
    assert (first.accept_length, first.accept_method) == (3.0, "first-point-average")
    assert (second.accept_length, second.accept_isolated, second.accept_method) == (None, False, "not-isolated")
    assert "--enable-metrics" in second.accept_note
