"""`dsv4-agent mtp --json` as a user runs it: whole processes, start to exit, beside `rg -n`.

Trees: the sglang 0.5.23 wheel; the corpus checkout (`../shared/corpus/build-checkout.sh`: the
wheel with upstream registered tests, fixtures and runners); and that checkout at 2x and 4x (the
files the inference reads - registered tests, argument hooks, the test package - copied in once
and three more times, each copy's bytes made distinct, so it reads and parses 2x / 4x as much). Each process is cold: a fresh interpreter
with nothing cached, the research cache off (the OS file cache is warm after the first round, as
on any machine that has the tree). Each round also times one process on the checkout with the
research cache (tools/source/research_cache.py) holding that tree, as a second run meets it. Medians of 5 rounds with min-max spread, interleaved so machine load hits every tree
alike, with references measured in the same rounds: a bare `python -c pass` (interpreter
start), `rg -l speculative` and `rg -n speculative` over the same tree (the floor of any search). Also the in-process
warm/cold ratio on the 2x tree (the parse cache must hold it) and the largest resident size.
The trees take turns at going first (odd rounds run them in reverse).

Goals (exit 1 on a miss), all ratios of the same rounds: on the wheel and the checkout, the median
of mtp ÷ `rg -n speculative` <= 50; 4x tree < 4x the checkout (linear or better), in CPU seconds:
the work, which other processes on a shared machine do not stretch as they stretch a 30-second
wall figure measured minutes from its reference (the wall ratio is shown beside it); warm
inference on the 2x tree cheaper than cold (CPU seconds, wall beside it); a research-cached
process < 0.6x a cold one. Standalone: `python benchmarks/mtp_inference.py
[--rounds N]`; benchmarks/run_all.py collects its rows (benchmarks/harness.py).
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import AGENT, clean_env, finish, row  # noqa: E402
from tools.source.research_cache import OFF_ENV  # noqa: E402
from tools.source.resolve import ensure_wheel_source  # noqa: E402
from tools.source.search import find_rg  # noqa: E402

ROUNDS = 5
MODEL = "deepseek-ai/DeepSeek-V4-Flash"
GOAL_RG = 50.0  # a cold process ÷ `rg -n speculative` over the same tree
CACHED_GOAL = 0.6  # a research-cached process ÷ a cold one on the checkout
COLD = clean_env()  # the harness turns tools/source/research_cache.py off: every tree read anew
CACHED = {k: v for k, v in COLD.items() if k != OFF_ENV}  # on, whatever the caller's environment says
COPIED = ("test/registered", "python/sglang/srt/arg_groups", "python/sglang/test")


def corpus_script() -> Path | None:
    for candidate in (ROOT.parent / "shared", ROOT / "shared", Path("/work/shared")):
        script = candidate / "corpus" / "build-checkout.sh"
        if script.is_file():
            return script
    return None


def build_trees(work: Path, wheel: Path) -> dict[str, Path]:
    trees = {"wheel": wheel}
    script = corpus_script()
    if script is None:
        print("no ../shared/corpus here: only the wheel is measured")
        return trees
    checkout = work / "x1"
    subprocess.run(["bash", str(script), str(checkout), str(wheel)], check=True, capture_output=True)
    trees["checkout"] = checkout
    for times in (2, 4):
        tree = work / f"x{times}"
        # hard links for the unchanged part (fast; never written to); no .git (git may be packing it)
        shutil.copytree(checkout, tree, symlinks=True, copy_function=os.link, ignore=shutil.ignore_patterns(".git"))
        for copy in range(1, times):
            for rel in COPIED:
                target = tree / rel / f"copy{copy}"
                shutil.copytree(checkout / rel, target, dirs_exist_ok=True)
                for path in target.rglob("*.py"):  # distinct bytes: the parse cache must not share trees
                    with path.open("a") as handle:
                        handle.write(f"\n# benchmark copy {copy}\n")
        trees[f"checkout x{times}"] = tree
    return trees


def timed(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, int, float]:
    """Wall seconds, peak resident KiB and CPU seconds (user + system) of one whole process (its own
    rusage, via wait4: the CPU figure shows what the process needs when others load the machine)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {stderr.strip()[-300:]}")
    return elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def warm_ratio(tree: Path) -> tuple[float, float]:
    """Second inference in the same process ÷ first (the parse cache holds the trees): (wall, CPU).
    The CPU seconds are the goal's: two back-to-back calls of one process, one sample, and a burst
    of load on a shared machine stretches either wall figure alone."""
    code = ("import time\nfrom tools.mtp.infer import InferMtpArgs, infer_mtp\n"
            f"a=InferMtpArgs(sglang={str(tree)!r}, model={MODEL!r})\n"
            "def timed():\n t,c=time.perf_counter(),time.process_time(); infer_mtp(a)\n"
            " return time.perf_counter()-t, time.process_time()-c\n"
            "(cw,cc),(ww,wc)=timed(),timed()\nprint(ww/cw, wc/cc)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, env=COLD)
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="dsv4-agent mtp --json as whole processes, beside rg")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per tree (median of these)")
    rounds = parser.parse_args().rounds
    rg = find_rg() or "rg"
    wheel = ensure_wheel_source("0.5.23")
    with tempfile.TemporaryDirectory(prefix="dsv4-mtp-bench-") as tmp:
        trees = build_trees(Path(tmp), wheel)
        runs: dict[str, list[float]] = {name: [] for name in trees}
        rss: dict[str, int] = {name: 0 for name in trees}
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        bare, floor, cached = [], {name: [] for name in trees}, []
        grep: dict[str, list[float]] = {name: [] for name in trees}
        reference = trees.get("checkout", trees["wheel"])
        mtp = [AGENT, "mtp", "--model", MODEL, "--json", "--sglang"]
        for n in range(rounds):
            bare.append(timed([sys.executable, "-c", "pass"])[0])
            # the trees take turns: in odd rounds the 4x tree goes first, so a quiet or busy stretch of
            # a shared machine does not always fall on the same tree
            for name, tree in (reversed(trees.items()) if n % 2 else trees.items()):
                seconds, peak, used = timed([*mtp, str(tree)], env=COLD)
                runs[name].append(seconds)
                cpu[name].append(used)
                rss[name] = max(rss[name], peak)
                floor[name].append(timed([rg, "-l", "speculative", "--", "."], cwd=tree)[0])
                grep[name].append(timed([rg, "-n", "speculative", "--", "."], cwd=tree)[0])
            timed([*mtp, str(reference)], env=CACHED)  # stores the research (the tree is seconds old by now)
            cached.append(timed([*mtp, str(reference)], env=CACHED)[0])
        ratio = warm_ratio(trees["checkout x2"]) if "checkout x2" in trees else None
    bench = "mtp_inference"
    python = f"bare python {statistics.median(bare):.2f} s"
    rows = []
    for name in trees:
        ref = (f"{python}; rg -l {statistics.median(floor[name]):.3f} s; rg -n {statistics.median(grep[name]):.3f} s; "
               f"CPU {statistics.median(cpu[name]):.2f} s; peak RSS {rss[name] / 1024:.0f} MiB")
        rows.append(row(bench, f"mtp --json on the {name} (process, cold)", runs[name], "s", ref))
        if name in ("wheel", "checkout"):
            rows.append(row(bench, "  ÷ rg -n speculative over the same tree (same rounds)",
                            [m / g for m, g in zip(runs[name], grep[name], strict=True)], "x", ref,
                            f"<= {GOAL_RG:g}", GOAL_RG))
    ref = "checkout" if "checkout" in trees else "wheel"
    rows.append(row(bench, f"mtp --json on the {ref}, research cached ÷ cold (same rounds)",
                    [c / r for c, r in zip(cached, runs[ref], strict=True)], "x",
                    f"cached {statistics.median(cached):.2f} s (tools/source/research_cache.py)",
                    f"< {CACHED_GOAL}", CACHED_GOAL))
    if "checkout x4" in runs:
        scale = [x / c for x, c in zip(runs["checkout x4"], runs["checkout"], strict=True)]
        work = [x / c for x, c in zip(cpu["checkout x4"], cpu["checkout"], strict=True)]
        rows.append(row(bench, "4x tree ÷ checkout, CPU seconds (same rounds)", work, "x", "linear would be 4",
                        "<= 4", 4.0))
        rows.append(row(bench, "  the same, wall seconds", scale, "x", "linear would be 4"))
    if ratio is not None:
        rows.append(row(bench, "warm ÷ cold inference on the 2x tree, CPU seconds (one process)", [ratio[1]], "x",
                        "the parse cache holds the 2x tree", "< 1", 0.999))
        rows.append(row(bench, "  the same, wall seconds", [ratio[0]], "x", "the parse cache holds the 2x tree"))
    return finish(rows)


if __name__ == "__main__":
    sys.exit(main())
