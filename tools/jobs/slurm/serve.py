"""Starts a server job on its Slurm compute node, on a port free there, and records where it listens
once it is *our* server that listens there.

Standalone (stdlib plus ``processes.py``; copied next to the ledger like slurm_unit.py, run by the
wrapper's job leader on the node):

    python3 slurm_serve.py ENDPOINT_JSON -- PROGRAM ARGS... --port DSV4_PORT ...

Why: which node a job lands on, and which ports are free there, is unknown when it is submitted.
Here, on the node, the kernel picks a port free on every interface and the word ``DSV4_PORT`` after
``--port`` is replaced by it. The program runs as our child, in the job's process group. A port
free a moment ago can be taken before a server that loads a model for minutes binds it, so
``{"node", "port", "job_id", "restart"}`` is written atomically to ENDPOINT_JSON (in the shared run
folder) only when a process of this job's own group holds the listening socket (read from
``/proc`` on the node): the agent never probes a server that is not ours. The agent pairs ``node``
with the job's BatchHost (``scontrol show job``), so an endpoint left by an earlier attempt of a
requeued job is never used. We exit with the program's exit status.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import processes

PLACEHOLDER = "DSV4_PORT"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))  # every interface: the port must be free where the server binds (0.0.0.0)
        return s.getsockname()[1]


def _write(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(endpoint_path, argv):
    if "--port" not in argv or argv.index("--port") + 1 >= len(argv) or argv[argv.index("--port") + 1] != PLACEHOLDER:
        sys.stderr.write("slurm_serve.py: the command needs '--port %s'\n" % PLACEHOLDER)
        return 2
    port = free_port()
    argv = list(argv)
    argv[argv.index("--port") + 1] = str(port)
    record = {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0], "port": port,
              "job_id": os.environ.get("SLURM_JOB_ID", ""), "restart": os.environ.get("SLURM_RESTART_COUNT", "0")}
    sys.stdout.write("[dsv4-agent] server on node %s, port %d\n" % (record["node"], port))
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: None)  # the server gets it as a member of the job's group
    group = os.getpgrp()
    leader = processes.start_time(group)
    server = subprocess.Popen(argv)
    recorded = False
    while server.poll() is None:
        if not recorded and processes.group_listens(group, leader, port):
            _write(endpoint_path, record)
            recorded = True
        time.sleep(0.2 if not recorded else 1.0)
    code = server.returncode
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: slurm_serve.py ENDPOINT_JSON -- PROGRAM ARGS...\n")
        sys.exit(2)
    sys.exit(main(args[0], args[2:]))
