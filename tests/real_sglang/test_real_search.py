"""The baseline part of a budgeted search on the real SGLang: ``--budget`` on a benchmark of the tiny model,
served by the real 0.5.23 server on the CPU. The baseline is the search's first candidate and its reference:
one real server start measures its first look and every repeat, the real server prices a start and a repeat
(the re-estimate in the trace), and replay re-derives each decision from the run folder.

The GPU is the nvidia-smi double (tests/campaign_fixtures.py): it only makes the host look like one with a GPU.
"""
from __future__ import annotations

import json

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from tests.campaign_fixtures import campaign_env
from tests.cli_helpers import only_run, run_cli
from tests.real_sglang.conftest import TIER, RealSglang, plan_args

pytestmark = TIER


def test_the_baseline_of_a_search_is_measured_on_one_real_server_start(real_sglang: RealSglang, tmp_path):
    env = campaign_env(tmp_path, gpus=1)
    args = plan_args(real_sglang, "--budget", "30m")
    repeats = args.index("--repeats")
    args[repeats + 1] = "2"
    out = run_cli(*args, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = only_run(tmp_path)
    tags = [json.loads(x)["tag"] for x in (run / "bench" / "baseline.jsonl").read_text().splitlines()]
    assert sorted(tags) == sorted(f"baseline-c{c}{r}" for c in (1, 2) for r in ("", "-r2"))
    assert [p.name for p in (run / "jobs").glob("serve-*")] == ["serve-baseline"]
    state = json.loads((run / "bench" / "search.json").read_text())
    assert state["extra"] == ["baseline"] and not state["drops"] and not state["not_measured"]
    events = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
    budget = [e for e in events if e["type"] == "search_budget"]
    assert budget and budget[0]["server_start_s"] > 0 and set(budget[0]["repeat_s"]) == {"1", "2"}
    report = replay_run(run)
    assert report.exit_code == ExitCode.DONE, report.render()
    assert report.search is not None and report.search.checked >= 2 and not report.search.problems
