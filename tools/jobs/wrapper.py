"""Runs one job and records how it ended. Standalone on purpose (stdlib only; it imports only
``processes.py``, which always sits next to it) so that an executor can copy both to another host
and run them with any python3. Executors start it with ``-S``: no ``site`` (installed packages,
their ``.pth`` hooks) to import for a script that needs none of it.

    python3 wrapper.py JOB_DIR            the wrapper: starts the job, enforces timeout and stop
    python3 wrapper.py --lead JOB_DIR     the job's leader (started by the wrapper, see below)

The wrapper reads ``JOB_DIR/job.json`` (argv, env, cwd, timeout_s, grace_s) and starts the job's
*leader* in a session and process group of its own; the leader runs the command as its child
(same group) and writes ``JOB_DIR/command_exit.json`` when the command ends. The process group is
the job: it lives on if the wrapper dies (kill -9), and because its leader records the command's
exit itself, an agent that finds the wrapper dead re-attaches to the group and still learns how
the job ended, instead of starting it a second time beside it.

``JOB_DIR/wrapper.json`` is written first: the wrapper's pid and start time, the group id (the
leader's pid) and the leader's start time, so that nothing but these processes is ever signalled.
When the leader has ended, whatever its command left in the group (children carrying the job
token) is ended too, so that an ended job holds nothing. Finally ``JOB_DIR/exit.json`` is written
atomically: ``{"exit_code", "reason", "ended_at"}`` with reason ``exited`` | ``timed_out`` |
``stopped`` (and, in a Slurm job, ``slurm_restarts``: which run of it this was). Output goes to ``JOB_DIR/log.txt``.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import processes


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError, RecursionError):  # RecursionError: nested past the parser
        return None


def _end_group(pgid, leader_start, proc, grace_s):
    """SIGTERM the job's group, then SIGKILL it if it is still there after the grace."""
    if not processes.is_group_leader(pgid, leader_start):
        return
    os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    if processes.group_alive(pgid, leader_start):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # also reaches grandchildren that outlived the leader


def _end_leftovers(pgid, leader_start, token, grace_s, log):
    """The leader has ended (or was killed): end what is left of the job's group - the command's
    children, proven ours by the job token - so that an ended job holds no GPU and no port."""
    left = processes.proven_members(pgid, leader_start, token)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not left:
            return
        log.write(("\n[dsv4-agent] the job's leader has ended; %s to what is left of its group (pids %s)\n"
                   % (signal.Signals(sig).name, ", ".join(map(str, left)))).encode())
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = processes.proven_members(pgid, leader_start, token)


def lead(job_dir):
    """The job's leader: run the command in this group, record its exit, exit with its code."""
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    env = dict(os.environ)
    env.update(job.get("env") or {})
    for sig in (signal.SIGTERM, signal.SIGINT):  # the command gets these as a group member; we outwait it
        signal.signal(sig, lambda *_: None)
    try:
        proc = subprocess.Popen(job["argv"], cwd=job.get("cwd") or None, env=env, stdin=subprocess.DEVNULL)
    except OSError as err:
        sys.stdout.write("[dsv4-agent] could not start %r: %s\n" % (job["argv"][0], err))
        sys.stdout.flush()
        code = 127
    else:
        code = proc.wait()
    _write_json(os.path.join(job_dir, "command_exit.json"), {"exit_code": code, "ended_at": time.time()})
    return 0


def main(job_dir):
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)
    grace_s = float(job.get("grace_s", 10.0))
    timeout_s = job.get("timeout_s")
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(time.time()))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the agent's terminal going away is no stop
    with open(os.path.join(job_dir, "log.txt"), "ab", buffering=0) as log:
        env = dict(os.environ)
        if job.get("token"):  # the leader and the command carry it: our proof that the group is this job
            env[processes.TOKEN_VARIABLE] = job["token"]
        proc = subprocess.Popen([sys.executable, "-S", os.path.abspath(__file__), "--lead", job_dir], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        leader_start = processes.start_time(proc.pid)
        _write_json(os.path.join(job_dir, "wrapper.json"), {
            "pid": os.getpid(), "start_time": processes.start_time(os.getpid()),
            "child_pgid": proc.pid, "child_start_time": leader_start})
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
                log.write(("\n[dsv4-agent] %s: ending the job's process group\n" % reason.replace("_", " ")).encode())
                _end_group(proc.pid, leader_start, proc, grace_s)
                proc.wait()
                break
        _end_leftovers(proc.pid, leader_start, job.get("token"), grace_s, log)
    ended = _read_json(os.path.join(job_dir, "command_exit.json")) or {}
    code = ended.get("exit_code", proc.returncode)
    _write_json(os.path.join(job_dir, "exit.json"), {"exit_code": code, "reason": reason, "ended_at": time.time(),
                                                     **_slurm_run()})
    return 0


def _slurm_run():
    """Which run of its Slurm job wrote this exit (a requeued job runs again under the same id), so
    that the exit of a run Slurm has since requeued is told from the rerun's own."""
    if not os.environ.get("SLURM_JOB_ID"):
        return {}
    try:
        return {"slurm_restarts": int(os.environ.get("SLURM_RESTART_COUNT") or 0)}
    except ValueError:
        return {}


if __name__ == "__main__":
    if sys.argv[1] == "--lead":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # inherited by the command, as nohup does
        sys.exit(lead(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
