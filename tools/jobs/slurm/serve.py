"""Starts a server job on its Slurm compute node, on a port free there, and records where it listens
once it is *our* server that listens there.

Standalone (stdlib plus ``processes.py``, copied next to the ledger, run by the job's leader):

    python3 slurm_serve.py ENDPOINT_JSON -- PROGRAM ARGS... --port DSV4_PORT ...

The node and its free ports are unknown at submission, so the port is picked here and replaces
``DSV4_PORT``. ``{"node", "port", "job_id", "restart"}`` goes to ENDPOINT_JSON only once a process of
this job's group holds the listening socket (a port free a moment ago can be taken meanwhile); the
agent pairs ``node`` with the job's BatchHost, so a requeued job's old endpoint is never used.
Exits with the program's status.
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
    port = processes.free_port("")  # every interface: where the server binds (0.0.0.0)
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
