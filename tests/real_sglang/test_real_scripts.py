"""The scripts a campaign wrote, run as written against the real SGLang: ``run_measure.sh`` starts
``serve_baseline.sh``'s server, its ``server_check.py`` accepts it by the real ``/server_info``, SGLang's
bench client and GSM8K check run against it, the script stops the server's whole process tree, and
``dsv4-agent report`` builds the results and the report from what the real tools wrote."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess

import pytest

from tests.cli_helpers import agent, only_run, run_cli
from tests.real_sglang.conftest import TIER, RealSglang, alive_in_group, gsm8k_file, plan_args
from tests.slowdown import limit
from tools.measure.server_check import port_taken

pytestmark = TIER


@pytest.fixture(scope="module")
def measured(real_sglang: RealSglang, tmp_path_factory):
    """A planned run whose run_measure.sh was then run by hand, as on a GPU host (one real server)."""
    home = tmp_path_factory.mktemp("scripts")
    planned = run_cli(*plan_args(real_sglang, "--plan-only", "--target-gpus", "1", "--accuracy-data", str(gsm8k_file(home)),
                                 "--accuracy-questions", "4"), cwd=home)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    run = only_run(home)
    done = subprocess.run(["bash", str(run / "run_measure.sh")], cwd=home, capture_output=True, text=True,
                          env={**os.environ, "SGLANG_PYTHON": str(real_sglang.python), "TP": "1"}, timeout=limit(700))
    return run, done


def test_run_measure_runs_the_real_server_and_bench_client(measured):
    run, done = measured
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "server_check" not in done.stderr  # the check accepted the real server at once
    lines = [json.loads(line) for line in (run / "bench" / "baseline.jsonl").read_text().splitlines()]
    assert [(r["tag"], r["max_concurrency"], r["completed"]) for r in lines] == [("baseline-c1", 1, 2),
                                                                                  ("baseline-c2", 2, 4)]
    assert all(r["server_info"]["version"] == "0.5.23" and r["accept_length"] is None for r in lines)
    snaps = [json.loads(line) for line in (run / "bench" / "snapshots" / "baseline.jsonl").read_text().splitlines()]
    assert len(snaps) == 4 and all(s["errors"] == [] for s in snaps)
    assert snaps[-1]["generation_tokens"] > snaps[0]["generation_tokens"]  # the real counters moved
    assert not (run / "bench" / "baseline.failures.jsonl").exists()


def test_the_script_stops_the_whole_real_process_tree(measured):
    run, done = measured
    started = re.search(r"starting server on port (\d+)", done.stdout)
    assert started, done.stdout[-2000:]
    log = run / "logs" / "server_baseline.log"
    assert "server_args={" in log.read_text()  # the real launcher logs its resolved arguments; the double does not
    pgid = int(re.search(r"server process group (\d+)", done.stdout).group(1))
    assert alive_in_group(pgid) == []  # launcher, scheduler, detokenizer, resource tracker: all gone
    assert not port_taken("127.0.0.1", int(started.group(1)))


def test_report_reads_what_the_real_tools_wrote(measured, tmp_path):
    run, _done = measured
    out = agent("report", str(run), cwd=run.parent.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = list(csv.DictReader((run / "results.csv").open()))
    assert [(r["variant"], r["concurrency"]) for r in rows] == [("baseline", "1"), ("baseline", "2")]
    assert all(float(r["output_throughput"]) > 0 and float(r["median_tpot_ms"]) > 0 for r in rows)
    results = json.loads((run / "results.json").read_text())
    assert {r["variant"] for r in results["runs"]} == {"baseline"} and len(results["points"]) == 2
    report = (run / "report.md").read_text()
    assert "baseline" in report and "accuracy" in report.lower()
    accuracy = json.loads((run / "bench" / "accuracy" / "baseline.json").read_text())
    assert accuracy["accuracy"] is not None and accuracy["accuracy"] <= 0.25  # random weights
    assert "cannot tell variants apart" in report

