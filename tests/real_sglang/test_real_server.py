"""One real SGLang server, started by the test in a session of its own (to the agent: someone else's).

Against it: the double (tests/doubles/sglang_server.py) is held to what the real one answers; the
agent's identity check accepts it by its real ``/server_info`` and refuses it where it is not ours;
SGLang's real bench client and GSM8K check run against it and the agent's parsers read what they
wrote; the accuracy gate says plainly what a random model's score means.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.real_sglang.conftest import TIER, ForeignServer, RealSglang
from tests.slowdown import limit
from tools.jobs.executor import free_local_port

DOUBLE = Path(__file__).parents[1] / "doubles" / "sglang_server.py"
GET_PATHS = ("/health", "/server_info", "/get_server_info", "/model_info", "/get_model_info", "/v1/models")
# Fields the agent reads from /server_info (tools/measure/server_check.py, accept_snapshots.py, results.py).
READ_FIELDS = ("model_path", "tp_size", "launch_command", "internal_states", "version", "speculative_algorithm",
               "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
               "speculative_draft_model_path")

pytestmark = TIER


@pytest.fixture(scope="module")
def real(real_sglang: RealSglang, tmp_path_factory):
    server = ForeignServer(real_sglang, free_local_port("127.0.0.1"), tmp_path_factory.mktemp("real") / "server.log")
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def double(real_sglang: RealSglang, tmp_path_factory):
    port = free_local_port("127.0.0.1")
    log = tmp_path_factory.mktemp("double") / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, str(DOUBLE), "--model-path", str(real_sglang.model), "--host",
                                    "127.0.0.1", "--port", str(port), "--enable-metrics",
                                    *" ".join(real_sglang.server_args).split()], stdout=out, stderr=subprocess.STDOUT)
    server = type("Double", (), {"url": f"http://127.0.0.1:{port}", "port": port, "process": process, "log": log})
    try:
        from tests.cli_helpers import wait_for
        from tests.real_sglang.conftest import healthy
        wait_for(lambda: healthy(server.url), 120, "the double's /health")
        yield server
    finally:
        process.kill()
        process.wait()


def request(url: str, body: dict | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=limit(300)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def shape(value):
    """The JSON value's structure: keys and kinds, numbers as one kind (SGLang writes 8 and 8.0 alike)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__


def differences(double, real, where: str = "") -> list[str]:
    """What the double answers that the real server does not answer the same way (null fits any kind)."""
    if isinstance(double, dict) and isinstance(real, dict):
        out = []
        for key, value in double.items():
            if key not in real:
                out.append(f"{where}.{key}: only the double has it")
            else:
                out += differences(value, real[key], f"{where}.{key}")
        return out
    if isinstance(double, list) and isinstance(real, list):
        return differences(double[0], real[0], where + "[0]") if double and real else []
    if "null" in (double, real) or double == real:
        return []
    return [f"{where}: the double gives {double}, the real server {real}"]


def test_differences_finds_what_differs():
    """The comparison itself can fail: a missing field and a changed kind are both found."""
    assert differences(shape({"a": 1, "b": {"c": "x"}}), shape({"a": "1", "b": {}})) == [
        ".a: the double gives number, the real server str", ".b.c: only the double has it"]
    assert differences(shape({"a": None, "b": [1.5]}), shape({"a": {"x": 1}, "b": [2]})) == []


@pytest.mark.parametrize("path", GET_PATHS)
def test_the_double_answers_what_the_real_server_answers(real, double, path):
    real_code, real_text = request(real.url + path)
    double_code, double_text = request(double.url + path)
    assert (double_code, real_code) == (200, 200), (path, double_text, real_text)
    real_json = json.loads(real_text) if real_text.strip() else {}
    double_json = json.loads(double_text) if double_text.strip() else {}
    assert differences(shape(double_json), shape(real_json), path) == []
    if path in ("/server_info", "/get_server_info"):
        for name in READ_FIELDS:
            assert name in real_json and name in double_json, name
        assert real_json["launch_command"].split()[:2] == double_json["launch_command"].split()[:2] \
            == ["--model-path", str(Path(real_json["model_path"]))]


@pytest.mark.parametrize("path, body", [
    ("/generate", {"text": "def main():", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}),
    ("/generate", {"input_ids": [5, 6, 7, 8], "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}),
    ("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "hello"}],
                              "max_tokens": 8}),
])
def test_generation_answers_have_the_real_fields(real, double, path, body):
    real_code, real_text = request(real.url + path, body)
    double_code, double_text = request(double.url + path, body)
    assert (double_code, real_code) == (200, 200), (double_text, real_text)
    assert differences(shape(json.loads(double_text)), shape(json.loads(real_text)), path) == []


def test_metrics_name_the_counters_the_snapshots_read(real, double, real_sglang):
    from tools.measure.accept_snapshots import SNAPSHOT_PY

    request(real.url + "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}})
    for server in (real, double):
        code, text = request(server.url + "/metrics")
        assert code == 200 and "sglang:generation_tokens_total{" in text
        taken = subprocess.run([str(real_sglang.python), "-c", SNAPSHOT_PY, server.url, "t", "after"],
                               capture_output=True, text=True, timeout=limit(120))
        snap = json.loads(taken.stdout)
        assert snap["errors"] == [] and snap["generation_tokens"] >= 4, (server.url, snap)
        assert snap["verify_calls"] == 0 and snap["avg_spec_accept_length"] is None  # no speculative decoding


def test_identity_check_reads_the_real_server_info(real, real_sglang):
    from tools.measure.server_check import expected_identity, fetch_info, identity_problem

    info = fetch_info(real.url)
    assert info is not None and info["version"] == "0.5.23"
    assert identity_problem(info, expected_identity(str(real_sglang.model), {})) == ""
    mtp = identity_problem(info, expected_identity(str(real_sglang.model), {"--speculative-algorithm": "EAGLE"}))
    assert "--speculative-algorithm unset, not EAGLE" in mtp
    assert "it serves model" in identity_problem(info, expected_identity("/some/other/model", {}))


def test_a_real_server_of_someone_else_is_never_taken_for_ours(real, real_sglang, tmp_path):
    """On the port the script wanted: the run_measure.sh check and the agent's own launch refuse it."""
    from tools.base import ToolError
    from tools.jobs.local import LocalExecutor
    from tools.measure.server import launch_server
    from tools.measure.server_check import expected_identity, ours
    from tools.scripts.models import ServeVariant

    expect = expected_identity(str(real_sglang.model), {})
    code, why = ours(real.url, real.port, os.getpgid(os.getpid()), None, expect)
    assert code == 3 and "no process of our server's group" in why
    executor = LocalExecutor(tmp_path / "jobs")
    variant = ServeVariant(name="baseline", model_path=str(real_sglang.model))
    with pytest.raises(ToolError, match=f"port {real.port} on 127.0.0.1 is already in use by another process"):
        launch_server(executor, variant, str(real_sglang.python), port=real.port, ready_timeout_s=60)
    assert real.process.poll() is None and not list((tmp_path / "jobs").glob("*/job.json"))  # untouched, nothing ours


def test_real_bench_client_output_parses(real, real_sglang, tmp_path):
    from tools.measure.results import parse_jsonl

    out = tmp_path / "baseline.jsonl"
    done = subprocess.run([str(real_sglang.python), "-m", "sglang.benchmark.serving", "--backend", "sglang",
                           "--dataset-name", "random-ids", "--random-input-len", "16", "--random-output-len", "16",
                           "--random-range-ratio", "1.0", "--num-prompts", "4", "--max-concurrency", "2",
                           "--tokenizer", str(real_sglang.model), "--host", "127.0.0.1", "--port", str(real.port),
                           "--warmup-requests", "1", "--tag", "baseline-c2", "--output-file", str(out)],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=limit(900))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    parsed = parse_jsonl(out, "baseline")
    (record,) = parsed.records
    assert record.concurrency == 2 and record.completed == 4
    assert all(record.metrics[m] > 0 for m in ("output_throughput", "median_tpot_ms", "median_ttft_ms", "p99_itl_ms"))
    assert record.accept_length is None  # no speculative decoding: the agent must not invent one


def test_real_gsm8k_check_and_the_gate_on_a_random_model(real, real_sglang, tmp_path):
    from tools.measure.accuracy import AccuracyPlan, AccuracyResult, client_args, gate, parse_log

    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?", "answer": f"{i}+{i}={2 * i}\n#### {2 * i}"})
                            + "\n" for i in range(1, 7)))
    plan = AccuracyPlan(questions=4, shots=2, parallel=4, max_new_tokens=24, data_path=str(data))
    done = subprocess.run([str(real_sglang.python), *client_args(plan, "127.0.0.1", real.port)], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=limit(900))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    accuracy, invalid = parse_log(done.stdout + done.stderr)
    assert accuracy is not None and 0 <= accuracy <= 0.25 and invalid is not None  # random weights: about nothing
    results = {"baseline": AccuracyResult(variant="baseline", accuracy=accuracy, invalid=invalid, questions=4),
               "other": AccuracyResult(variant="other", accuracy=accuracy, invalid=invalid, questions=4)}
    verdict = gate(results, plan)
    assert verdict["other"].passed is None and "cannot tell variants apart" in verdict["other"].reason


def test_run_measure_refuses_a_real_server_on_the_port_it_wanted(real, real_sglang, tmp_path):
    from tests.cli_helpers import only_run, run_cli
    from tests.real_sglang.conftest import plan_args

    planned = run_cli(*plan_args(real_sglang, "--plan-only", "--target-gpus", "1"), cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    run = only_run(tmp_path)
    done = subprocess.run(["bash", str(run / "run_measure.sh")], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "SGLANG_PYTHON": str(real_sglang.python), "PORT": str(real.port),
                               "TP": "1"}, timeout=limit(600))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"port {real.port} on 127.0.0.1 is already in use by another process" in done.stderr
    failures = [json.loads(line) for line in (run / "bench" / "baseline.failures.jsonl").read_text().splitlines()]
    assert sorted(f["concurrency"] for f in failures) == [1, 2]
    assert not (run / "bench" / "baseline.jsonl").exists()  # nothing measured on someone else's server
    assert real.process.poll() is None and request(real.url + "/health")[0] == 200  # and it was left alone
