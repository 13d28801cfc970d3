"""Runs one job and records how it ended. Standalone on purpose (stdlib only, no package
imports) so that an executor can copy it to another host and run it with any python3.

    python3 wrapper.py JOB_DIR

Reads ``JOB_DIR/job.json`` (argv, env, cwd, timeout_s, grace_s), starts the command in a
process group of its own, appends its output to ``JOB_DIR/log.txt`` and finally writes
``JOB_DIR/exit.json`` atomically: ``{"exit_code", "reason", "ended_at"}`` where reason is
``exited`` | ``timed_out`` | ``stopped``. ``JOB_DIR/wrapper.json`` is written first
(pid + the command's pgid) so a restarted agent can re-attach instead of launching again.
"""
import json
import os
import signal
import subprocess
import sys
import time


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _end_group(pgid, proc, grace_s):
    """SIGTERM the command's group, then SIGKILL it if it is still there after the grace."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)  # also reaches grandchildren that outlived the leader
    except ProcessLookupError:
        pass


def main(job_dir):
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    env = dict(os.environ)
    env.update(job.get("env") or {})
    grace_s = float(job.get("grace_s", 10.0))
    timeout_s = job.get("timeout_s")
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(time.time()))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the agent's terminal going away is no stop
    with open(os.path.join(job_dir, "log.txt"), "ab", buffering=0) as log:
        try:
            proc = subprocess.Popen(
                job["argv"], cwd=job.get("cwd") or None, env=env, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError as err:
            log.write(f"[dsv4-agent] could not start {job['argv'][0]!r}: {err}\n".encode())
            _write_json(os.path.join(job_dir, "wrapper.json"), {"pid": os.getpid(), "child_pgid": None})
            _write_json(os.path.join(job_dir, "exit.json"),
                        {"exit_code": 127, "reason": "exited", "ended_at": time.time()})
            return 0
        _write_json(os.path.join(job_dir, "wrapper.json"), {"pid": os.getpid(), "child_pgid": proc.pid})
        deadline = time.monotonic() + float(timeout_s) if timeout_s else None
        reason = "exited"
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if stop_requested:
                reason = "stopped"
            elif deadline is not None and time.monotonic() > deadline:
                reason = "timed_out"
            if reason != "exited":
                log.write(f"\n[dsv4-agent] {reason.replace('_', ' ')}: ending the job's process group\n".encode())
                _end_group(proc.pid, proc, grace_s)
                proc.wait()
                break
    _write_json(os.path.join(job_dir, "exit.json"),
                {"exit_code": proc.returncode, "reason": reason, "ended_at": time.time()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
