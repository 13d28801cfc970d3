"""Starts a server job on its Slurm compute node, on a port free there, and records where it listens.

Standalone (stdlib only; copied next to the ledger like slurm_unit.py, run by the wrapper on the node):

    python3 slurm_serve.py ENDPOINT_JSON -- PROGRAM ARGS... --port DSV4_PORT ...

Why: which node a job lands on, and which ports are free there, is unknown when it is submitted.
Here, on the node, the kernel picks a port free on every interface, the word ``DSV4_PORT`` after
``--port`` is replaced by it, and ``{"node", "port", "job_id", "restart"}`` is written atomically to
ENDPOINT_JSON (in the shared run folder) before the program replaces this process (exec: the
wrapper's stop signal reaches the server itself). The agent pairs ``node`` with the job's BatchHost
(``scontrol show job``), so an endpoint left by an earlier attempt of a requeued job is never used.
"""
import json
import os
import socket
import sys

PLACEHOLDER = "DSV4_PORT"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))  # every interface: the port must be free where the server binds (0.0.0.0)
        return s.getsockname()[1]


def main(endpoint_path, argv):
    if "--port" not in argv or argv.index("--port") + 1 >= len(argv) or argv[argv.index("--port") + 1] != PLACEHOLDER:
        sys.stderr.write("slurm_serve.py: the command needs '--port %s'\n" % PLACEHOLDER)
        return 2
    port = free_port()
    argv = list(argv)
    argv[argv.index("--port") + 1] = str(port)
    record = {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0], "port": port,
              "job_id": os.environ.get("SLURM_JOB_ID", ""), "restart": os.environ.get("SLURM_RESTART_COUNT", "0")}
    tmp = endpoint_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, endpoint_path)
    sys.stdout.write("[dsv4-agent] server on node %s, port %d\n" % (record["node"], port))
    sys.stdout.flush()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: slurm_serve.py ENDPOINT_JSON -- PROGRAM ARGS...\n")
        sys.exit(2)
    sys.exit(main(args[0], args[2:]))
