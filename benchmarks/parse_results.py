"""Parse 10,000 bench_serving result records (goal: under 1 s).

Records are shaped like SGLang 0.5.23's ``--output-file`` lines (server_info included,
``request_rate`` as the bare ``Infinity`` token). Reference measured in the same process: a bare
``json.loads`` of every line, the floor any parser pays. Prints medians of 5 runs and the ratio.

    .venv/bin/python benchmarks/parse_results.py
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from tools.measure.results import compare, parse_jsonl  # noqa: E402

N = 10_000
RUNS = 5


def record(i: int) -> str:
    metrics = {f"{s}_{m}_ms": 1.0 + (i % 7) for s in ("mean", "median", "std", "p90", "p95", "p99")
               for m in ("ttft", "tpot", "itl", "e2e_latency")}
    body = {"tag": f"v-c{1 << (i % 5)}", "backend": "sglang", "dataset_name": "random-ids",
            "max_concurrency": 1 << (i % 5), "random_input_len": 1024, "random_output_len": 1024,
            "server_info": {"model_path": "/models/DeepSeek-V4-Flash", "internal_states": [
                {"avg_spec_accept_length": 2.7, "last_gen_throughput": 1234.5}]},
            "duration": 12.5, "completed": 128, "output_throughput": 900.0 + i, "accept_length": 2.7, **metrics}
    return '{"request_rate": Infinity, ' + json.dumps(body)[1:]


def samples(fn) -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.jsonl"
        path.write_text("\n".join(record(i) for i in range(N)) + "\n")
        reference = samples(lambda: [json.loads(line) for line in path.read_text().splitlines()])
        parsed = parse_jsonl(path)
        with_compare = samples(lambda: compare(parse_jsonl(path).records))
    assert len(parsed.records) == N and not parsed.problems
    ref = f"json.loads of every line {statistics.median(reference):.2f} s"
    return finish([row("parse_results", f"parse {N:,} bench records + compare", with_compare, "s", ref, "< 1 s", 1.0)])


if __name__ == "__main__":
    sys.exit(main())
