"""Nothing but our own server is ever measured (issue 13 item 1). Another server on the port is a
real listener on loopback: the SGLang server double, serving the same model, started by the test
as "someone else". run_measure.sh and the agent's own sweep must refuse the port or fail the
point with the reason, never measure it; readiness is our process group holding the port plus
/server_info reporting what we launched (answered as SGLang 0.5.23 answers it)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env
from tests.cli_helpers import only_run, start_agent, wait_for
from tests.doubles.tokenizer import build_tokenizer
from tests.slowdown import limit
from tools.jobs.executor import free_local_port
from tools.measure.server_check import expected_identity, fetch_info, identity_problem
from tools.scripts import FlagChoice, MeasurePlan, ServeVariant
from tools.measure.script_render import RenderScriptsArgs, render_scripts

SGLANG_PYTHON = str(DOUBLES / "sglang_python")
QUICK = dict(concurrency=[1], input_len=4, output_len=8, min_prompts=2, warmup_requests=1, ready_timeout_s=30)


class ForeignServer:
    """Someone else's SGLang server on ``port`` (its requests logged to ``access``)."""

    def __init__(self, model_path: Path, port: int, log: Path, *flags: str):
        self.port, self.log = port, log
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSV4_DOUBLE_")}
        self.proc = subprocess.Popen([sys.executable, str(DOUBLES / "sglang_server.py"), "--model-path", str(model_path),
                                      "--port", str(port), "--enable-metrics", *flags],
                                     stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        wait_for(lambda: fetch_info(f"http://127.0.0.1:{port}") is not None, 30, "the other server to answer")
        assert self.proc.poll() is None, self.log.read_text()  # it answered, not a server of ours on the port

    def requests(self) -> list[str]:
        return re.findall(r'"(?:GET|POST) (\S+)', self.log.read_text())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def tok(tmp_path) -> Path:
    return build_tokenizer(tmp_path / "tok")


def _measure(tmp_path: Path, plan: MeasurePlan, **env: str) -> subprocess.Popen:
    render_scripts(RenderScriptsArgs(out_dir=str(tmp_path / "run"), plan=plan, sglang_python=SGLANG_PYTHON))
    return subprocess.Popen(["bash", str(tmp_path / "run" / "run_measure.sh")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DSV4_DOUBLE_REAL_PYTHON": sys.executable, **env})


def test_run_measure_refuses_a_port_someone_else_listens_on(tmp_path, tok):
    other = ForeignServer(tok, free_local_port(), tmp_path / "other.log")
    try:
        plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path=str(tok))], tokenizer=str(tok), **QUICK)
        run = _measure(tmp_path, plan, PORT=str(other.port))
        out, err = run.communicate(timeout=limit(120))
        assert run.returncode == 1, out + err
        assert "0 failed point(s)" not in out and "1 failed point(s)" in out
        failure = json.loads((tmp_path / "run" / "bench" / "baseline.failures.jsonl").read_text())
        assert f"port {other.port} on 127.0.0.1 is already in use by another process" in failure["reason"]
        assert not (tmp_path / "run" / "bench" / "baseline.jsonl").exists()
        assert not any(path.startswith("/generate") for path in other.requests())  # never measured
    finally:
        other.close()


def test_run_measure_never_measures_a_server_that_took_the_port_while_ours_loaded(tmp_path, tok):
    """Ours binds only after "loading" (held until the test lets it bind); the other one takes the port first."""
    plan = MeasurePlan(variants=[ServeVariant(name="baseline", model_path=str(tok))], tokenizer=str(tok), **QUICK)
    bind_ok = tmp_path / "bind-ok"
    run = _measure(tmp_path, plan, DSV4_DOUBLE_BIND_AFTER_FILE=str(bind_ok))
    log = tmp_path / "run" / "logs" / "server_baseline.log"
    port = int(wait_for(lambda: log.exists() and re.search(r"'--port', '(\d+)'", log.read_text()), 60,
                        "our server to start").group(1))
    try:
        other = ForeignServer(tok, port, tmp_path / "other.log")
    finally:
        bind_ok.touch()  # ours may try to bind now: the port is taken
    try:
        out, err = run.communicate(timeout=limit(120))
        assert run.returncode == 1, out + err
        failure = json.loads((tmp_path / "run" / "bench" / "baseline.failures.jsonl").read_text())
        assert "no process of our server's group" in failure["reason"] and "another process holds it" in failure["reason"]
        assert not (tmp_path / "run" / "bench" / "baseline.jsonl").exists()
        assert not any(path.startswith("/generate") for path in other.requests())
    finally:
        other.close()


def _serve_port(root: Path) -> int | None:
    for job in (root / "runs").glob("*/jobs/serve-baseline/job.json"):
        argv = json.loads(job.read_text())["argv"]
        return int(argv[argv.index("--port") + 1])
    return None


def test_the_agents_sweep_fails_the_point_when_another_server_holds_the_port(tmp_path, sglang_wheel_root):
    bind_ok = tmp_path / "bind-ok"  # our servers bind only once it exists: the other one takes the port first
    env = {**campaign_env(tmp_path), "DSV4_DOUBLE_BIND_AFTER_FILE": str(bind_ok)}
    proc = start_agent(*campaign_args(tmp_path, sglang_wheel_root, goal="benchmark"), cwd=tmp_path, env=env)
    port = wait_for(lambda: _serve_port(tmp_path), 180, "the baseline server job to be launched")
    try:
        other = ForeignServer(tmp_path / "tok", port, tmp_path / "other.log")
    finally:
        bind_ok.touch()
    try:
        output, _ = proc.communicate(timeout=limit(300))
        run = only_run(tmp_path)
        assert proc.returncode == 1, output  # nothing was measured
        result = json.loads((run / "result.json").read_text())
        assert result["steps"]["benchmark"] == "failed"
        failures = [json.loads(x) for x in (run / "bench" / "baseline.failures.jsonl").read_text().splitlines()]
        assert failures and all("another process holds that port" in f["reason"] for f in failures)
        assert not (run / "bench" / "baseline.jsonl").exists() or not (run / "bench" / "baseline.jsonl").read_text()
        assert not any(path.startswith("/generate") for path in other.requests())
    finally:
        other.close()


def test_server_info_identity_is_checked_as_sglang_0_5_23_answers_it(tmp_path, tok):
    """/server_info carries resolved fields and launch_command; both are compared to what we launched."""
    port = free_local_port()
    mtp = ForeignServer(tok, port, tmp_path / "mtp.log", "--speculative-algorithm", "EAGLE",
                        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    try:
        info = fetch_info(f"http://127.0.0.1:{port}")
        assert info["speculative_num_draft_tokens"] == 4 and "--speculative-algorithm EAGLE" in info["launch_command"]
        ours = ServeVariant(name="mtp", model_path=str(tok), flags=[
            FlagChoice(flag="--speculative-algorithm", value="EAGLE"), FlagChoice(flag="--speculative-num-steps", value="3")])
        flags = {c.flag: c.value for c in ours.flags}
        assert identity_problem(info, expected_identity(str(tok), flags)) == ""
        assert "not the baseline" in identity_problem(info, expected_identity(str(tok), {}))
        assert "--speculative-num-steps 3, not 2" in identity_problem(
            info, expected_identity(str(tok), {**flags, "--speculative-num-steps": "2"}))
        assert "serves model" in identity_problem(info, expected_identity("/other/model", flags))
        without_command = {k: v for k, v in info.items() if k != "launch_command"}  # older builds: resolved fields
        assert identity_problem(without_command, expected_identity(str(tok), flags)) == ""
        assert "not the baseline" in identity_problem(without_command, expected_identity(str(tok), {}))
    finally:
        mtp.close()
