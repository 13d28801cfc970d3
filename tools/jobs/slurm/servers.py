"""Servers on compute nodes (``Capabilities.servers_on_nodes``): the SlurmExecutor part that starts a
server through ``slurm_serve.py`` (which records its port once the job's own group listens there)
and finds where the agent and the bench clients reach it: the job's BatchHost and its NodeAddr.
"""
from __future__ import annotations

from pathlib import Path

from tools.jobs.ledger.files import read_json
from tools.jobs.outages import OutageWait
from tools.jobs.slurm.query import RUNNING, node_address, show_job


class NodeServers:
    """Mixed into SlurmExecutor (which provides root, env, python, job_dir and _freeze_helpers)."""

    root: Path
    env: dict[str, str]
    python: str
    outage: OutageWait

    # -- servers on compute nodes ----------------------------------------------------------
    def serve_argv(self, key: str, argv: list[str]) -> list[str]:
        """``argv`` (with ``--port DSV4_PORT``) run through slurm_serve.py: the node picks its port at start."""
        self._freeze_helpers()
        return [self.python, str(self.root / "slurm_serve.py"), str(self.job_dir(key) / "endpoint.json"), "--", *argv]

    def server_endpoint(self, key: str) -> tuple[str, int] | None:
        """(the node's address, port) of a running server job once it recorded its port, else None; an
        endpoint.json from a node other than the job's BatchHost (an earlier attempt) is stale."""
        folder = self.job_dir(key)
        endpoint, slurm = read_json(folder / "endpoint.json"), read_json(folder / "slurm.json")
        if endpoint is None or slurm is None:
            return None
        info = show_job(slurm["job_id"], self.env, self.outage)
        if info is None or info.state not in RUNNING or not info.batch_host or endpoint.get("node") != info.batch_host:
            return None
        return node_address(info.batch_host, self.env), int(endpoint["port"])

    def job_listens(self, key: str, port: int) -> bool:
        """True when the server job recorded ``port`` as held by its own group on its current node."""
        endpoint = self.server_endpoint(key)
        return endpoint is not None and endpoint[1] == int(port)
