"""SSH executor ledger calls on the connection they share, beside the same calls each on a connection
of its own, against a real sshd on loopback.

    .venv/bin/python benchmarks/ssh_calls.py [--rounds 5] [--calls 10]

Each ledger call is one ``ssh`` process, start to exit (here: listing the run's jobs on the host).
Calls alternate, one by one, between the executor as shipped (one shared connection per host,
tools/jobs/ssh/multiplex.py) and the reference, the same executor told
``--ssh-option=-oControlMaster=no``, so that load on the machine shows in both. The sshd is a
throwaway one (tests/services/start_sshd.sh on a free port, stopped at the end). Without ``ssh`` or
``sshd`` here nothing is measured and the exit status is 2. Goal: a call on the shared connection
takes at most half as long as one on its own (medians per call). Over a WAN the saving is larger: a
connection of its own costs round trips for TCP, the key exchange and the login.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import REPO, finish, row  # noqa: E402
from tools.jobs.executor import free_local_port  # noqa: E402
from tools.jobs.ssh.executor import SshExecutor  # noqa: E402

SERVICES = REPO / "tests" / "services"
GOAL_RATIO = 0.5


def _one_call(executor: SshExecutor) -> float:
    started = time.perf_counter()
    executor.jobs()
    return time.perf_counter() - started


def _round(shared: SshExecutor, alone: SshExecutor, calls: int, n: int) -> tuple[float, float]:
    """Seconds per call of each, the calls alternating one by one (shared first in even rounds), so
    that a burst of load on a shared machine falls on both alike."""
    pair = [shared, alone] if n % 2 == 0 else [alone, shared]
    spent = {id(shared): 0.0, id(alone): 0.0}
    for _ in range(calls):
        for executor in pair:
            spent[id(executor)] += _one_call(executor)
    return spent[id(shared)] / calls, spent[id(alone)] / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="ledger calls per round")
    opts = parser.parse_args()
    if not shutil.which("ssh") or not (shutil.which("sshd") or Path("/usr/sbin/sshd").exists()):
        print("not run here: needs OpenSSH's ssh and sshd (Debian: openssh-client openssh-server)")
        return 2
    with tempfile.TemporaryDirectory(prefix="dsv4-bench-ssh-") as scratch:
        work = Path(scratch)
        env = {**os.environ, "DSV4_SERVICES_DIR": str(work / "services"), "DSV4_SSHD_PORT": str(free_local_port())}
        subprocess.run([str(SERVICES / "start_sshd.sh")], env=env, check=True, capture_output=True, timeout=60)
        config = ["-F", str(work / "services" / "sshd" / "ssh_config")]
        shared = SshExecutor("ssh://dsv4-test", work / "shared" / "jobs", ssh_options=config)
        alone = SshExecutor("ssh://dsv4-test", work / "alone" / "jobs", ssh_options=[*config, "-oControlMaster=no"])
        try:
            shared.jobs(), alone.jobs()  # the first call finds the host's python and opens the shared connection
            samples: dict[str, list[float]] = {"shared": [], "alone": []}
            for n in range(opts.rounds):
                per_shared, per_alone = _round(shared, alone, opts.calls, n)
                samples["shared"].append(per_shared)
                samples["alone"].append(per_alone)
        finally:
            for executor in (shared, alone):  # the host is this machine: its run folders go
                subprocess.run(["ssh", *config, "-oControlMaster=no", "dsv4-test",
                                f"rm -rf -- {shlex.quote(executor.remote_run)}"], capture_output=True, timeout=30)
            subprocess.run(["ssh", *config, *shared.shared_connection, "-O", "exit", "dsv4-test"],
                           capture_output=True, timeout=30)  # the shared connection ends now, not in a minute
            subprocess.run([str(SERVICES / "stop_sshd.sh")], env=env, capture_output=True, timeout=60)
    ratios = [s / a for s, a in zip(samples["shared"], samples["alone"], strict=True)]
    alone_ms = statistics.median(samples["alone"]) * 1000
    return finish([
        row("ssh_calls", "ledger call on the shared connection", samples["shared"], "ms",
            f"own connection {alone_ms:.0f} ms", scale=1000),
        row("ssh_calls", "shared ÷ own connection, per call", ratios, "x", "same rounds", f"<= {GOAL_RATIO}",
            GOAL_RATIO),
    ])


if __name__ == "__main__":
    sys.exit(main())
