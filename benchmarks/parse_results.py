"""Parse 10,000 bench_serving result records and reduce them to per-point statistics (what the verdict and
the report compare), beside a bare ``json.loads``.

Records are shaped like SGLang 0.5.23's ``--output-file`` lines (server_info included,
``request_rate`` as the bare ``Infinity`` token). Reference, in the same process and the same
rounds (each round times both, back to back, taking turns at going first): a bare ``json.loads``
of every line, the floor any parser pays. Both are pure computation in this one thread, so each is
timed in this process's CPU seconds (``time.process_time``): a shared machine's other work, which
only delays them, is not counted on either side (the wall seconds are shown too). Goal: the median
of parse + statistics ÷ the reference <= 4.

    .venv/bin/python benchmarks/parse_results.py [--rounds 9]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import finish, row  # noqa: E402
from tools.measure.results import parse_jsonl  # noqa: E402
from tools.measure.verdict import point_stats  # noqa: E402

N = 10_000
ROUNDS = 9
GOAL = 4.0


def record(i: int) -> str:
    metrics = {f"{s}_{m}_ms": 1.0 + (i % 7) for s in ("mean", "median", "std", "p90", "p95", "p99")
               for m in ("ttft", "tpot", "itl", "e2e_latency")}
    body = {"tag": f"v-c{1 << (i % 5)}", "backend": "sglang", "dataset_name": "random-ids",
            "max_concurrency": 1 << (i % 5), "random_input_len": 1024, "random_output_len": 1024,
            "server_info": {"model_path": "/models/DeepSeek-V4-Flash", "internal_states": [
                {"avg_spec_accept_length": 2.7, "last_gen_throughput": 1234.5}]},
            "duration": 12.5, "completed": 128, "output_throughput": 900.0 + i, "accept_length": 2.7, **metrics}
    return '{"request_rate": Infinity, ' + json.dumps(body)[1:]


def timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.jsonl"
        path.write_text("\n".join(record(i) for i in range(N)) + "\n")
        parsed = parse_jsonl(path)
        reference, ours = [], []  # (CPU, wall) per round
        bare = lambda: [json.loads(line) for line in path.read_text().splitlines()]  # noqa: E731
        full = lambda: point_stats(parse_jsonl(path).records)  # noqa: E731
        for n in range(rounds):
            if n % 2:
                ours.append(timed(full))
                reference.append(timed(bare))
            else:
                reference.append(timed(bare))
                ours.append(timed(full))
    assert len(parsed.records) == N and not parsed.problems
    ref = (f"json.loads of every line: CPU {statistics.median(r[0] for r in reference):.2f} s, "
           f"wall {statistics.median(r[1] for r in reference):.2f} s")
    return finish([
        row("parse_results", f"parse {N:,} bench records + statistics (wall)", [o[1] for o in ours], "s", ref),
        row("parse_results", "  ÷ json.loads of every line, CPU seconds (same rounds)",
            [o[0] / r[0] for o, r in zip(ours, reference, strict=True)], "x", ref, f"<= {GOAL:g}", GOAL),
        row("parse_results", "  the same, wall seconds", [o[1] / r[1] for o, r in zip(ours, reference, strict=True)],
            "x", ref),
    ])


if __name__ == "__main__":
    sys.exit(main())
