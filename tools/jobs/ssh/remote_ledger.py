"""The remote half of the SSH executor: keeps the job ledger on the host where jobs run.

Standalone on purpose (stdlib only, plus ``job_folder.py`` and ``processes.py``, which travel in
the same call): ``SshExecutor`` sends this file's source over ``ssh HOST python3 -c SOURCE OP``
with a JSON request on stdin, so the remote host needs nothing but ``python3``. Each call does one thing and answers one JSON object on stdout
(``pack`` answers a gzipped tar stream instead):

  launch  write job.json (intent) then start ``wrapper.py JOB_DIR`` in a new session; a key that
          is already in the ledger is re-attached, never started twice; one whose folder is gone while
          its processes run (``previous``: the identity the agent kept of them) is refused
  poll    ledger snapshot of some keys (+ new log bytes from a given offset); with ``wait_s``, answers
          once a job is no longer plainly running (ended, its wrapper gone, stopping) or after
          ``wait_s``, whichever is first: one ssh call watches the jobs for that long
  stop    stop.json, SIGTERM to the wrapper, SIGKILL to the job's group after the grace (only
          processes whose start time the ledger recorded; else it answers why it refused)
  list    keys in the ledger
  pack    tar of one job folder (results and log), fetched when the job has ended
  put     write job inputs into the remote run folder (answers its absolute path)
  pack_dir  tar of one folder of the remote run folder (the job's outputs), fetched after it ended
  gpus    run the agent's ``nvidia-smi`` queries (GPUs, compute processes) on this host
  port    a port nobody listens on right now on one of this host's addresses (for a server job)
  listens whether the job's own process group listens on a port of this host (server readiness)
  get     one file of the remote run folder, base64 (a result a job appended to, e.g. bench JSONL)

The ledger files are the same as LocalExecutor's (see ``job_folder.py``). Liveness is decided
here, with the remote clock and /proc of the remote, by the same code LocalExecutor runs.
"""
import base64
import json
import os
import subprocess
import sys
import tarfile
import time

try:
    from tools.jobs import job_folder, processes
except ImportError:  # on the host: bundled into this call by SshExecutor
    import processes
    import job_folder

SPAWN_WAIT_S = job_folder.SPAWN_WAIT_S
MAX_LOG_CHUNK = 4 * 1024 * 1024  # bytes of log sent back per poll; the rest comes next poll
MAX_POLL_WAIT_S = 10.0  # the longest a poll watches the jobs before it answers
POLL_WATCH_STEP_S = 0.1  # how often a waiting poll reads the ledger (file reads and /proc, no ssh)
_read_json, _write_json, _snapshot = job_folder.read_json, job_folder.write_json, job_folder.snapshot


def _started(job_dir):
    return any(os.path.exists(os.path.join(job_dir, n)) for n in ("launch.json", "wrapper.json"))


def _put_files(run, files):
    """Write run-relative files atomically; a path that leaves the run folder is refused."""
    for item in files:
        path = os.path.normpath(os.path.join(run, item["path"]))
        if not path.startswith(run + os.sep):
            return "input %r is outside the run folder" % item["path"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".dsv4-put.tmp"
        with open(tmp, "wb") as f:
            f.write(base64.b64decode(item["data"]))
        os.chmod(tmp, item.get("mode", 0o644) & 0o777)
        os.replace(tmp, path)
    return None


def op_put(req):
    run = req["run"]
    os.makedirs(run, exist_ok=True)
    problem = _put_files(run, req.get("files") or [])
    return {"error": problem} if problem else {"run": run}


def op_gpus(req):
    """Both nvidia-smi queries the agent parses (req["queries"]), and this host's CUDA_VISIBLE_DEVICES."""
    answers = []
    for query in req["queries"]:
        try:
            done = subprocess.run([req.get("nvidia_smi") or "nvidia-smi"] + query, capture_output=True, text=True,
                                  timeout=30)
        except FileNotFoundError:
            return {"missing": True}
        except subprocess.TimeoutExpired:
            answers.append([None, "", "nvidia-smi did not answer in 30 s"])
            continue
        answers.append([done.returncode, done.stdout, done.stderr[-2000:]])
    return {"answers": answers, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def op_port(req):
    return {"port": processes.free_port(req.get("host") or "127.0.0.1")}


def op_get(req):
    path = os.path.normpath(os.path.join(req["run"], req["path"]))
    if not path.startswith(req["run"] + os.sep):
        return {"error": "%r is outside the run folder" % req["path"]}
    try:
        with open(path, "rb") as f:
            return {"data": base64.b64encode(f.read()).decode()}
    except FileNotFoundError:
        return {"missing": True}


def _differs(job, recorded):
    """Same rule as JobSpec.differs_from: the identity when both have one, else argv, GPUs, cwd."""
    if job.get("identity") is not None and recorded.get("identity") is not None:
        same = json.dumps(job["identity"], sort_keys=True) == json.dumps(recorded["identity"], sort_keys=True)
        return None if same else "identity"
    for field in ("argv", "gpus", "cwd"):
        if recorded.get(field) != job.get(field):
            return field
    return None


def op_launch(req):
    job_dir = os.path.join(req["root"], req["key"])
    job = req["job"]
    recorded = _read_json(os.path.join(job_dir, "job.json"))
    if recorded is not None:
        field = _differs(job, recorded)
        if field is not None:
            return {"error": "job key %r already names a different job on this host (%s differs); "
                             "pick a new key or start a new run" % (req["key"], field)}
        deadline = recorded.get("intent_at", 0) + SPAWN_WAIT_S
        while not _started(job_dir) and time.time() < deadline:
            time.sleep(0.1)  # another launch may be starting it right now
        if _started(job_dir):
            return {"attached": True, "snapshot": _snapshot(job_dir)}
    else:
        found = job_folder.orphans(job_dir, req.get("previous"))  # its folder was deleted while it ran?
        if found:
            return {"orphaned": found, "folder": job_dir}
    if req.get("run"):  # a job about to start for the first time gets its inputs (never a running one)
        problem = _put_files(req["run"], req.get("inputs") or [])
        if problem:
            return {"error": problem}
        for relative in req.get("folders") or []:  # where the job writes outputs (e.g. bench/)
            folder = os.path.normpath(os.path.join(req["run"], relative))
            if not folder.startswith(req["run"] + os.sep):
                return {"error": "output folder %r is outside the run folder" % relative}
            os.makedirs(folder, exist_ok=True)
    os.makedirs(job_dir, exist_ok=True)
    wrapper_path = os.path.join(req["root"], "wrapper.py")
    for name, source in (("processes.py", req["processes_source"]), ("wrapper.py", req["wrapper_source"])):
        tmp = os.path.join(req["root"], name + ".tmp")
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, os.path.join(req["root"], name))
    job["intent_at"] = time.time()
    _write_json(os.path.join(job_dir, "job.json"), job)  # intent first: a crash never double-starts
    env = dict(os.environ)
    if job.get("token"):  # the wrapper carries the job's token too: it is signalled only with that proof
        env[processes.TOKEN_VARIABLE] = job["token"]
    env[processes.JOB_DIR_ENV] = os.path.abspath(job_dir)  # finds the job's processes if its folder is lost
    with open(os.path.join(job_dir, "wrapper.err"), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-S", wrapper_path, os.path.abspath(job_dir)], cwd=job_dir,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True, close_fds=True, env=env,
        )
    _write_json(os.path.join(job_dir, "launch.json"),
                {"pid": proc.pid, "start_time": processes.start_time(proc.pid), "launched_at": time.time()})
    deadline = time.monotonic() + SPAWN_WAIT_S
    while time.monotonic() < deadline and not os.path.exists(os.path.join(job_dir, "wrapper.json")):
        time.sleep(0.02)
    return {"attached": False, "snapshot": _snapshot(job_dir)}


def _plainly_running(snap):
    return snap["exit"] is None and snap["alive"] and not snap["stop"]


def op_poll(req):
    folders = {key: os.path.join(req["root"], key) for key in req["keys"]}
    deadline = time.monotonic() + min(float(req.get("wait_s") or 0), MAX_POLL_WAIT_S)
    snapshots = {key: _snapshot(folder) for key, folder in folders.items()}
    while time.monotonic() < deadline and all(_plainly_running(s) for s in snapshots.values()):
        time.sleep(POLL_WATCH_STEP_S)
        snapshots = {key: _snapshot(folder) for key, folder in folders.items()}
    out = {}
    for key, offset in req["keys"].items():
        job_dir = folders[key]
        entry = {"snapshot": snapshots[key], "log": "", "log_offset": 0}
        if offset is not None:
            try:
                with open(os.path.join(job_dir, "log.txt"), "rb") as f:
                    size = f.seek(0, os.SEEK_END)
                    start = offset if offset <= size else 0  # a shorter log was replaced: resend
                    f.seek(start)
                    entry["log"] = base64.b64encode(f.read(MAX_LOG_CHUNK)).decode()
                    entry["log_offset"] = start
            except FileNotFoundError:
                pass
        out[key] = entry
    return {"jobs": out}


def op_stop(req):
    return job_folder.stop(os.path.join(req["root"], req["key"]), req["grace_s"])


def op_listens(req):
    wrapper = _read_json(os.path.join(req["root"], req["key"], "wrapper.json")) or {}
    return {"listens": processes.group_listens(wrapper.get("child_pgid"), wrapper.get("child_start_time"),
                                               int(req["port"]))}


def op_list(req):
    root = req["root"]
    if not os.path.isdir(root):
        return {"keys": []}
    return {"keys": sorted(k for k in os.listdir(root) if os.path.exists(os.path.join(root, k, "job.json")))}


def op_pack(req):
    job_dir = os.path.join(req["root"], req["key"])
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|gz") as tar:
        for name in sorted(os.listdir(job_dir)):
            if not name.endswith(".tmp"):
                tar.add(os.path.join(job_dir, name), arcname=name)


def op_pack_dir(req):
    folder = os.path.normpath(os.path.join(req["run"], req["path"]))
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|gz") as tar:
        if folder.startswith(req["run"] + os.sep) and os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                if not name.endswith(".tmp"):
                    tar.add(os.path.join(folder, name), arcname=name)


OPS = {"launch": op_launch, "poll": op_poll, "stop": op_stop, "list": op_list, "put": op_put, "gpus": op_gpus,
       "port": op_port, "get": op_get, "listens": op_listens}


def main(op):
    req = json.load(sys.stdin)
    req["root"] = os.path.abspath(os.path.expanduser(req["root"]))  # ssh starts in $HOME
    if req.get("run"):
        req["run"] = os.path.abspath(os.path.expanduser(req["run"]))
    if op in ("pack", "pack_dir"):
        (op_pack if op == "pack" else op_pack_dir)(req)
        return 0
    answer = OPS[op](req)
    answer["python"] = sys.executable  # the caller runs later calls with it, past any shim on the PATH
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
