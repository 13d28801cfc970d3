"""Per-point speculative accept length from before/after snapshots of the server's counters.

SGLang's ``/server_info`` ``avg_spec_accept_length`` (what the bench client writes as
``accept_length``) is cumulative since server start, so on a server shared by several points it
mixes warmup and earlier points. With ``--enable-metrics``, ``/metrics`` has
``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total``, and

    point accept length = delta generation tokens / delta verify calls

is SGLang's per-request definition pooled over the point. The counters are the tokenizer manager's,
per finished request, so they cover every data-parallel attention rank; ``/server_info`` lists one
``internal_states`` entry per DP rank, each rank's own cumulative average, and every rank's is kept
(never the first alone). Without counters only the first point on a fresh server is isolated, and
with several DP ranks only when every rank reports the same average; any other point says it cannot be. ``SNAPSHOT_PY`` runs under the SGLang
interpreter for both our sweep and ``run_measure.sh``, so both write the same snapshot lines.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.child_env import child_env

SNAPSHOTS_DIR = "snapshots"

# Runs under the SGLang python (stdlib only); args: base URL, tag, phase. Prints one JSON line.
# No single quotes inside: run_measure.sh embeds it single-quoted.
SNAPSHOT_PY = r"""
import json, sys, time, urllib.request
url, tag, phase = sys.argv[1:4]
COUNTERS = {"sglang:generation_tokens_total": "generation_tokens", "sglang:spec_verify_calls_total": "verify_calls"}
snap = {"tag": tag, "phase": phase, "time": time.time(), "avg_spec_accept_length": None,
        "rank_accept_lengths": [], "generation_tokens": None, "verify_calls": None, "errors": []}
def get(path):
    with urllib.request.urlopen(url + path, timeout=20) as response:
        return response.read().decode("utf-8", "replace")
try:
    info = json.loads(get("/server_info"))
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = [s for s in info.get("internal_states") or [{}] if isinstance(s, dict)] or [{}]
    ranks = [s.get("avg_spec_accept_length") for s in states]
    snap["rank_accept_lengths"] = ranks
    snap["avg_spec_accept_length"] = ranks[0] if len(set(ranks)) == 1 else None
except Exception as err:
    snap["errors"].append("/server_info: %s" % err)
try:
    text = get("/metrics")
    totals = dict.fromkeys(COUNTERS.values(), 0.0)
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if line.startswith("#") or name not in COUNTERS:
            continue
        rest = line[line.rindex("}") + 1:] if "}" in line else line[len(name):]
        totals[COUNTERS[name]] += float(rest.split()[0])
    snap.update(totals)
except Exception as err:
    snap["errors"].append("/metrics: %s (start the server with --enable-metrics)" % err)
print(json.dumps(snap))
"""


class Snapshot(BaseModel):
    tag: str
    phase: Literal["before", "after"]
    time: float = 0.0
    avg_spec_accept_length: float | None = Field(None, description="The server's cumulative average; None when "
                                                 "its DP ranks report different ones")
    rank_accept_lengths: list[float | None] = Field(default_factory=list, description="Each DP rank's own average")
    generation_tokens: float | None = None
    verify_calls: float | None = None
    errors: list[str] = Field(default_factory=list)

    @property
    def info_ok(self) -> bool:
        """/server_info was read (a missing /metrics alone does not count against it)."""
        return not [e for e in self.errors if not e.startswith("/metrics:")]

    @property
    def has_counters(self) -> bool:
        return self.generation_tokens is not None and self.verify_calls is not None


Method = Literal["counters", "first-point-average", "no-speculation", "not-isolated", "no-snapshots"]


class PointAcceptLength(BaseModel):
    value: float | None = Field(None, description="This point's accept length; None when not isolated")
    isolated: bool = Field(False, description="True when value covers this point's requests only")
    method: Method = Field("no-snapshots", description="How the value was obtained (or why there is none)")
    note: str = ""


def snapshot_file(results_dir: Path, variant: str) -> Path:
    return results_dir / SNAPSHOTS_DIR / f"{variant}.jsonl"


def take_snapshot(python: str, url: str, tag: str, phase: str, out_file: Path, timeout_s: float = 60.0) -> Snapshot:
    """Run SNAPSHOT_PY with the SGLang python and append its line to ``out_file``."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([python, "-c", SNAPSHOT_PY, url, tag, phase], capture_output=True, text=True,
                              timeout=timeout_s, env=child_env())
        line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        snap = Snapshot.model_validate_json(line) if done.returncode == 0 and line else Snapshot(
            tag=tag, phase=phase, errors=[f"snapshot exited {done.returncode}: {done.stderr.strip()[-300:]}"])
    except (OSError, subprocess.TimeoutExpired, ValueError) as err:  # recorded: the point shows "not isolated"
        snap = Snapshot(tag=tag, phase=phase, errors=[f"snapshot failed: {err}"])
    with open(out_file, "a") as f:
        f.write(snap.model_dump_json() + "\n")
    return snap


def load_pairs(path: Path) -> tuple[dict[str, tuple[Snapshot | None, Snapshot]], list[str]]:
    """tag -> (its before snapshot, its after snapshot): the last 'after' of each tag and the last
    'before' written ahead of it (a re-run point writes a new pair). Also bad-line problems."""
    pairs: dict[str, tuple[Snapshot | None, Snapshot]] = {}
    pending: dict[str, Snapshot] = {}
    problems: list[str] = []
    if not path.exists():
        return pairs, problems
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            snap = Snapshot.model_validate(json.loads(line))
        except ValueError as err:  # JSONDecodeError and pydantic's ValidationError
            problems.append(f"{path.parent.name}/{path.name}:{number}: not a snapshot ({str(err).splitlines()[0]})")
            continue
        if snap.phase == "before":
            pending[snap.tag] = snap
        else:
            pairs[snap.tag] = (pending.get(snap.tag), snap)
    return pairs, problems


def point_accept_length(before: Snapshot | None, after: Snapshot | None) -> PointAcceptLength:
    """The point's own accept length from the snapshots around it, or why it cannot be had."""
    if after is None:
        return PointAcceptLength(method="no-snapshots", note="no server snapshots for this point (older run "
                                 "folder?): only the cumulative figure since server start is known")
    if before is not None and before.has_counters and after.has_counters:
        tokens = after.generation_tokens - before.generation_tokens
        verifies = after.verify_calls - before.verify_calls
        if tokens < 0 or verifies < 0:
            return PointAcceptLength(method="not-isolated", note="server counters went backwards during the "
                                     "point (server restarted?)")
        if verifies == 0:
            return PointAcceptLength(method="no-speculation", isolated=True,
                                     note="no speculative verify calls during the point")
        return PointAcceptLength(value=tokens / verifies, isolated=True, method="counters",
                                 note=f"{tokens:g} generated tokens / {verifies:g} verify calls")
    if after.avg_spec_accept_length is None and len(set(after.rank_accept_lengths)) > 1:
        return PointAcceptLength(method="not-isolated", note=f"{len(after.rank_accept_lengths)} data-parallel ranks "
                                 "report separate cumulative averages and no per-request counters were read; start "
                                 "the server with --enable-metrics")
    if after.avg_spec_accept_length is None:
        why = "; ".join(after.errors)
        if not after.info_ok:
            return PointAcceptLength(method="not-isolated", note=f"server snapshot failed: {why}")
        return PointAcceptLength(method="no-speculation", isolated=True,
                                 note="server reports no speculative statistics")
    if before is not None and before.info_ok and not before.avg_spec_accept_length:
        return PointAcceptLength(value=after.avg_spec_accept_length, isolated=True, method="first-point-average",
                                 note="no speculative statistics before this point: the server's average is "
                                      "this point's (SGLang folds counts in every decode log interval, so the "
                                      "last steps may be missing)")
    return PointAcceptLength(method="not-isolated",
                             note="the server exposes only a cumulative average (no /metrics counters) and "
                                  "earlier requests are in it; start the server with --enable-metrics")


def pending_befores(path: Path) -> set[str]:
    """Tags whose last snapshot is a 'before' with no 'after' yet."""
    if not path.exists():
        return set()
    pending: set[str] = set()
    for line in path.read_text(errors="replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line: load_pairs reports it
        if isinstance(item, dict) and isinstance(item.get("tag"), str):
            (pending.add if item.get("phase") == "before" else pending.discard)(item["tag"])
    return pending
