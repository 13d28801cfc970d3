"""Runs one Slurm unit (the body of every batch script SlurmExecutor submits).

Standalone (stdlib only; copied next to the ledger) because it runs on a compute node:

    python3 slurm_unit.py JOB_DIR

Slurm may start a unit more than once (requeue after a node failure, ``scontrol requeue``). A unit
whose ``exit.json`` already records a clean exit (code 0) produced its result: it is not run again.
Anything else (no exit.json, or a failed attempt, kept as ``exit.previous.json``) runs
``wrapper.py JOB_DIR`` in this same process (exec), so ``scancel --batch`` signals the wrapper.
"""
import contextlib
import json
import os
import sys
import time


def main(job_dir):
    exit_path = os.path.join(job_dir, "exit.json")
    try:
        with open(exit_path) as f:
            ended = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        ended = None
    if ended is not None and ended.get("reason") == "exited" and ended.get("exit_code") == 0:
        note = "[dsv4-agent] %s: unit already succeeded (exit.json has exit code 0); not running it again\n"
        with open(os.path.join(job_dir, "log.txt"), "a") as log:
            log.write(note % time.strftime("%Y-%m-%d %H:%M:%S"))
        return 0
    if ended is not None:
        os.replace(exit_path, os.path.join(job_dir, "exit.previous.json"))
    for name in ("wrapper.json", "endpoint.json", "command_exit.json"):  # a previous run's: not this one's
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(job_dir, name))
    wrapper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrapper.py")
    env = dict(os.environ)
    try:
        with open(os.path.join(job_dir, "job.json")) as f:
            token = json.load(f).get("token")
    except (OSError, ValueError):
        token = None
    if token:  # the wrapper carries the job's token, as it does where it is started by an executor
        env["DSV4_JOB_TOKEN"] = token
    os.execve(sys.executable, [sys.executable, "-S", wrapper, job_dir], env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
