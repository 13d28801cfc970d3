"""One job's ledger folder where the job runs: read a snapshot of it, stop the job.

Standalone on purpose (stdlib only plus ``processes.py``): LocalExecutor imports it, and the SSH
executor sends it (with ``processes.py``) to the GPU host inside ``remote_ledger.py``'s call, so
one implementation decides, on the host where the processes are, what is alive and what may be
signalled. Files (written by the executor, ``wrapper.py`` and the job's leader):

  job.json           the spec plus ``intent_at``; written before anything starts
  launch.json        the wrapper's pid and kernel start time, written by the executor right after
  wrapper.json       the wrapper's pid and start time, the job's process group and its leader's
                     start time, written by the wrapper itself
  command_exit.json  the command's exit code, written by the job's leader
  stop.json          a stop was requested
  exit.json          how the job ended, written by the wrapper (or from command_exit.json here
                     when the wrapper died and the job's group has ended)

A process is signalled only when its pid runs with the start time recorded for it and carries
the job's token (``job.json``'s ``token``, read back from ``/proc/PID/environ``; see
``processes.py``), and a group only when its leader is that recorded process and still leads it. A
ledger without a token (an older agent's, or an edited one) may still count its processes as
running, so that nothing is started twice beside them, but never gets them signalled.
"""
import contextlib
import json
import os
import signal
import time

try:
    from tools.jobs import processes
except ImportError:  # standalone: next to wrapper.py, or bundled into the SSH ledger call
    import processes

SPAWN_WAIT_S = 5.0
SIGKILL_WAIT_S = 5.0  # the kernel ends a killed process at once, unless it is stuck inside a call


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError, RecursionError):  # RecursionError: nested past the parser
        return None  # writers rename atomically, so a torn file means "not there yet"


def write_json(path, data):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, str(path))


def wrapper_identity(launch, wrapper):
    """(pid, recorded start time or None) of the job's wrapper."""
    launch, wrapper = launch or {}, wrapper or {}
    pid = launch.get("pid") or wrapper.get("pid")
    start = launch.get("start_time") if launch.get("pid") == pid else None
    if start is None and wrapper.get("pid") == pid:
        start = wrapper.get("start_time")
    return pid, start


def job_token(job):
    """The job's token from its job.json, or None (a ledger that has none)."""
    token = (job or {}).get("token") if isinstance(job, dict) else None
    return token if isinstance(token, str) and token else None


def snapshot(job_dir):
    """The parsed ledger files and what runs, checked here; see ``tools/jobs/ledger/state.py``."""
    files = {name: read_json(os.path.join(job_dir, name + ".json"))
             for name in ("job", "launch", "wrapper", "exit", "command_exit")}
    pid, start = wrapper_identity(files["launch"], files["wrapper"])
    wrapper = files["wrapper"] or {}
    token = job_token(files["job"])
    snap = dict(files, stop=os.path.exists(os.path.join(job_dir, "stop.json")), now=time.time(),
                alive=processes.is_process(pid, start, token),
                job_alive=processes.group_alive(wrapper.get("child_pgid"), wrapper.get("child_start_time"), token))
    # A copy of a run folder (cp -r) holds the original's tokens: its processes run for the original's
    # folder (their DSV4_JOB_DIR), and the copy neither follows nor signals them.
    running = pid if snap["alive"] else wrapper.get("child_pgid") if snap["job_alive"] else None
    started_for = processes.job_dir_of(running) if running else None
    if started_for and os.path.realpath(started_for) != os.path.realpath(job_dir):
        snap.update(alive=False, job_alive=False, copied_from=started_for)
        return snap
    if snap["exit"] is None and snap["command_exit"] is not None and not snap["alive"] and not snap["job_alive"]:
        ended = dict(snap["command_exit"], reason="stopped" if snap["stop"] else "exited", recorded_by="ledger")
        write_json(os.path.join(job_dir, "exit.json"), ended)  # the wrapper died: its leader's record stands
        snap["exit"] = ended
    return snap


def unverifiable(snap):
    """Why this job's processes cannot be signalled safely, or '' (a pid runs that we cannot prove ours)."""
    if snap.get("copied_from"):
        return ("its processes run for the job folder %s: this run folder is a copy, and a copy never controls "
                "the original's jobs; nothing was signalled (`dsv4-agent jobs` on the original stops them)"
                % snap["copied_from"])
    pid, start = wrapper_identity(snap["launch"], snap["wrapper"])
    if pid and start is None and processes.start_time(pid) is not None:
        return ("no start time is recorded for its wrapper (pid %d), so it cannot be told from another process "
                "that reused the pid; nothing was signalled. Check it with `ps -o pid,pgid,lstart,args -p %d` "
                "and, if it is this job, stop it by hand with `kill -TERM -- -%d`" % (pid, pid, pid))
    wrapper = snap["wrapper"] or {}
    group, leader = wrapper.get("child_pgid"), wrapper.get("child_start_time")
    if not snap["alive"] and group and leader is None and processes.start_time(group) is not None:
        return ("no start time is recorded for its process group %d, so it cannot be told from another "
                "process that reused the id; nothing was signalled. Check it with `ps -o pid,pgid,lstart,args "
                "-g %d` and, if it is this job, stop it by hand with `kill -TERM -- -%d`" % (group, group, group))
    if job_token(snap["job"]) is None and (snap["alive"] or snap["job_alive"]):
        shown = group or pid
        return ("its job.json holds no job token (an older dsv4-agent wrote it, or it was edited), so its processes "
                "cannot be proven to be the ones this agent started; nothing was signalled. Check them with "
                "`ps -o pid,pgid,lstart,args -g %s` and, if they are this job, stop them by hand with "
                "`kill -TERM -- -%s`" % (shown, shown))
    return ""


def _signal_ours(snap, sig):
    """Send ``sig`` to the wrapper and/or the job's group, each only if it is the one we recorded."""
    pid, start = wrapper_identity(snap["launch"], snap["wrapper"])
    wrapper = snap["wrapper"] or {}
    token = job_token(snap["job"])
    if token is None:
        return  # unverifiable() refused already; never signal what carries no proof
    if sig == signal.SIGTERM and processes.is_process(pid, start, token):
        os.kill(pid, sig)  # the wrapper ends the group itself, with the job's grace
        return
    group, leader = wrapper.get("child_pgid"), wrapper.get("child_start_time")
    if processes.is_group_leader(group, leader, token):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
    else:  # the leader is gone (killed with the wrapper): what is left of its group, each proven ours
        for member in processes.proven_members(group, leader, token):
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, sig)
    if sig == signal.SIGKILL and processes.is_process(pid, start, token):
        os.kill(pid, sig)


def _running(snap):
    return snap["alive"] or snap["job_alive"]


def _left_unproven(snap):
    """Why the job cannot be stopped although nothing provably ours runs, or '': processes left in its
    group that carry no job token (see ``processes.unproven_members``)."""
    wrapper = snap["wrapper"] or {}
    group = wrapper.get("child_pgid")
    left = processes.unproven_members(group, wrapper.get("child_start_time"), job_token(snap["job"]))
    if not left:
        return ""
    return ("its process group %d still has processes (pids %s) that carry no job token, so they cannot be proven "
            "to be this job's; nothing was signalled. Check them with `ps -o pid,pgid,lstart,args -g %d` and, if "
            "they are this job, stop them by hand with `kill -TERM -- -%d`"
            % (group, ", ".join(map(str, left)), group, group))


def _still_running(snap):
    """Why the job runs on after SIGKILL: a process stuck in the kernel (a GPU driver call, say)."""
    wrapper = snap["wrapper"] or {}
    pid, _ = wrapper_identity(snap["launch"], snap["wrapper"])
    group = wrapper.get("child_pgid")
    pids = ([pid] if snap["alive"] else []) + processes.proven_members(group, wrapper.get("child_start_time"),
                                                                       job_token(snap["job"]))
    shown = ", ".join(map(str, sorted(set(pids)))) or "?"
    return ("its processes (pids %s) still run after SIGKILL (stuck in the kernel, in a driver call?); see "
            "`ps -o pid,stat,wchan:32,args -p %s`; they end when the call returns, else only a reboot ends them"
            % (shown, shown.replace(" ", "")))


def stop(job_dir, grace_s):
    """``{"snapshot"}`` after stopping the job, or ``{"refused": why, "snapshot"}`` when it could
    not be stopped (no proof that its processes are ours, or they outlived SIGKILL)."""
    snap = snapshot(job_dir)
    if snap["job"] is None or (snap["exit"] is not None and not _running(snap)):
        return {"snapshot": snap}
    refused = unverifiable(snap)
    if refused:
        return {"refused": refused, "snapshot": snap}
    if not _running(snap) and (snap["launch"] or snap["wrapper"]):
        refused = _left_unproven(snap)  # nothing of ours runs: nothing to stop, nothing to record
        return {"refused": refused, "snapshot": snap} if refused else {"snapshot": snap}
    write_json(os.path.join(job_dir, "stop.json"), {"requested_at": time.time()})
    _signal_ours(snap, signal.SIGTERM)
    if _ended_within(job_dir, float(grace_s) + 5.0):
        return {"snapshot": snapshot(job_dir)}
    _signal_ours(snapshot(job_dir), signal.SIGKILL)  # the grace is over: only the processes we recorded
    if _ended_within(job_dir, SIGKILL_WAIT_S):
        return {"snapshot": snapshot(job_dir)}
    snap = snapshot(job_dir)
    return {"refused": _still_running(snap), "snapshot": snap}


def _ended_within(job_dir, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        snap = snapshot(job_dir)
        if not _running(snap):
            return True
        time.sleep(0.02)  # a look is a few small reads; the campaign's next GPU job waits for this one's end
    return False


def orphans(job_dir, recorded=None):
    """``{"pids", "groups"}`` of what still runs of a job whose ledger folder is gone, or None."""
    pids = processes.processes_of_job(job_dir, recorded)
    if not pids:
        return None
    by_folder = set(processes.processes_of_job(job_dir))
    return {"pids": pids, "groups": sorted({g for g in map(processes.process_group, pids) if g is not None}),
            "by_token": sorted(set(pids) - by_folder)}


def orphan_refusal(key, folder, found, host=""):
    """Why a job whose ledger folder is gone is not started again: what of it still runs, and where."""
    where = " on %s" % host if host else ""
    pids, groups, by_token = found.get("pids") or [], found.get("groups") or [], found.get("by_token") or []
    how = "%s in their environment" % processes.JOB_DIR_ENV
    if by_token:
        how += (" or, for pid%s %s, the recorded process group and the job's token"
                % ("s" if len(by_token) > 1 else "", ", ".join(map(str, by_token))))
    return ("job %r has no ledger (%s%s is gone) but its processes still run%s (pids %s; process group%s %s; found by "
            "%s); it is not started a second time beside them: wait for them to end, or stop them%s with "
            "`kill -TERM -- %s`, then resume"
            % (key, folder, where, where, ", ".join(map(str, pids)), "s" if len(groups) > 1 else "",
               ", ".join(map(str, groups)) or "?", how, where, " ".join("-%d" % g for g in groups or pids[:1])))
