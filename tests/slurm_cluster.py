"""The session's one-node Slurm (munged + slurmctld + slurmd on loopback, tests/services/start_slurm.sh).

One fixture for every module that needs the cluster, registered once in tests/conftest.py: a
session fixture imported into several test modules is a separate fixture in each, so the session
started (and, at its end, stopped one after the other) a cluster per module. If CI already started
the cluster (pid files under /tmp/dsv4-test-services), it is reused.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.slowdown import limit
from tools.jobs.executor import free_local_port

SERVICES = Path(__file__).parent / "services"


@dataclass
class Slurm:
    base: Path
    _requeued_starts: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.base / "slurm.conf")}

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=limit(60))

    def hurry_requeued(self, job_id: str) -> str:
        """`scontrol show job` of a requeued job. One held back by Slurm's requeue delay (pending,
        reason BeginTime) is told to start two seconds after it was first seen held, not now:
        slurmd refuses a job's new credential made within the second its last run ended ("Job
        credential revoked": the rerun fails at once), which is what the delay is for. The start
        time is fixed at first sight, so asking on every poll does not push it on."""
        shown = self.run("scontrol", "show", "job", "-o", job_id).stdout
        if "JobState=PENDING" in shown and "Reason=BeginTime" in shown:
            start = self._requeued_starts.setdefault(
                job_id, time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 2)))
            self.run("scontrol", "update", f"jobid={job_id}", f"StartTime={start}")
        return shown

    def stop_slurmd(self) -> None:
        pid = int((self.base / "slurmd.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + limit(20)
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "slurmd did not stop"

    def stop_slurmctld(self) -> None:
        """The controller away (a restart, a failover): jobs and slurmd run on."""
        pid = int((self.base / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + limit(20)
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "slurmctld did not stop"

    def start_slurmctld(self) -> None:
        """Back with its saved state (no -c: the jobs it knew are known again)."""
        subprocess.run(["slurmctld", "-f", str(self.base / "slurm.conf")], env=self.env, check=True, timeout=limit(60))

    def start_slurmd(self) -> None:
        subprocess.run(["slurmd", "-f", str(self.base / "slurm.conf")], env=self.env, check=True, timeout=limit(60))


@pytest.fixture(scope="session")
def slurm(tmp_path_factory) -> Slurm:
    from tests.conftest import require_binary, service_running  # conftest imports this module

    shared = Path("/tmp/dsv4-test-services/slurm")
    if service_running(shared / "slurmctld.pid") and service_running(shared / "slurmd.pid"):
        yield Slurm(shared)
        return
    for binary in ("munged", "slurmctld", "slurmd", "sbatch"):
        require_binary(binary)
    # munged runs as user "munge" and must reach its socket folder: a 0755 folder in /tmp, not
    # pytest's 0700 one. Free ports, so that concurrent test sessions never meet.
    services_dir = Path(tempfile.mkdtemp(prefix="dsv4-services-", dir="/tmp"))
    services_dir.chmod(0o755)
    env = {**os.environ, "DSV4_SERVICES_DIR": str(services_dir),
           "DSV4_SLURMCTLD_PORT": str(_free_port()), "DSV4_SLURMD_PORT": str(_free_port())}
    subprocess.run([str(SERVICES / "start_slurm.sh")], env=env, check=True, capture_output=True, timeout=limit(120))
    try:
        yield Slurm(services_dir / "slurm")
    finally:
        subprocess.run([str(SERVICES / "stop_slurm.sh")], env=env, check=True, capture_output=True, timeout=limit(120))
        shutil.rmtree(services_dir, ignore_errors=True)


def _free_port() -> int:
    return free_local_port()  # outside the ephemeral range: no client connection takes it meanwhile
