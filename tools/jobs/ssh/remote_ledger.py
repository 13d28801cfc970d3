"""The remote half of the SSH executor: keeps the job ledger on the host where jobs run.

Standalone on purpose (stdlib only, no package imports): ``SshExecutor`` sends this file's
source over ``ssh HOST python3 -c SOURCE OP`` with a JSON request on stdin, so the remote host
needs nothing but ``python3``. Each call does one thing and answers one JSON object on stdout
(``pack`` answers a gzipped tar stream instead):

  launch  write job.json (intent) then start ``wrapper.py JOB_DIR`` in a new session; a key that
          is already in the ledger is re-attached, never started twice
  poll    ledger snapshot of some keys (+ new log bytes from a given offset)
  stop    stop.json, SIGTERM to the wrapper, SIGKILL to both process groups after the grace
  list    keys in the ledger
  pack    tar of one job folder (results and log), fetched when the job has ended
  put     write job inputs into the remote run folder (answers its absolute path)
  pack_dir  tar of one folder of the remote run folder (the job's outputs), fetched after it ended
  gpus    run ``nvidia-smi --query-gpu=index,name,memory.total`` on this host
  port    a port nobody listens on right now on one of this host's addresses (for a server job)
  get     one file of the remote run folder, base64 (a result a job appended to, e.g. bench JSONL)

The ledger files are the same as LocalExecutor's: job.json, launch.json, wrapper.json, log.txt,
stop.json, exit.json. Liveness is decided here, with the remote clock and /proc of the remote.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time

SPAWN_WAIT_S = 5.0
MAX_LOG_CHUNK = 4 * 1024 * 1024  # bytes of log sent back per poll; the rest comes next poll


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # writers rename atomically, so a torn file means "not there yet"


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _start_time(pid):
    """Kernel start time of pid (guards against pid reuse); None when gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields[19]


def _alive(launch, wrapper):
    pid = (launch or {}).get("pid") or (wrapper or {}).get("pid")
    if not pid:
        return False
    started = _start_time(pid)
    recorded = (launch or {}).get("start_time")
    return started is not None and (recorded is None or recorded == started)


def _snapshot(job_dir):
    launch = _read_json(os.path.join(job_dir, "launch.json"))
    wrapper = _read_json(os.path.join(job_dir, "wrapper.json"))
    return {
        "job": _read_json(os.path.join(job_dir, "job.json")),
        "launch": launch,
        "wrapper": wrapper,
        "exit": _read_json(os.path.join(job_dir, "exit.json")),
        "stop": os.path.exists(os.path.join(job_dir, "stop.json")),
        "alive": _alive(launch, wrapper),
        "now": time.time(),
    }


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
    try:
        done = subprocess.run([req.get("nvidia_smi") or "nvidia-smi", "--query-gpu=index,name,memory.total",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return {"missing": True}
    except subprocess.TimeoutExpired:
        return {"returncode": None, "stdout": "", "stderr": "nvidia-smi did not answer in 30 s"}
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:]}


def op_port(req):
    host = req.get("host") or "127.0.0.1"
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return {"port": s.getsockname()[1]}


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
    tmp = wrapper_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(req["wrapper_source"])
    os.replace(tmp, wrapper_path)
    job["intent_at"] = time.time()
    _write_json(os.path.join(job_dir, "job.json"), job)  # intent first: a crash never double-starts
    with open(os.path.join(job_dir, "wrapper.err"), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, wrapper_path, os.path.abspath(job_dir)], cwd=job_dir,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True, close_fds=True,
        )
    _write_json(os.path.join(job_dir, "launch.json"),
                {"pid": proc.pid, "start_time": _start_time(proc.pid), "launched_at": time.time()})
    deadline = time.monotonic() + SPAWN_WAIT_S
    while time.monotonic() < deadline and not os.path.exists(os.path.join(job_dir, "wrapper.json")):
        time.sleep(0.02)
    return {"attached": False, "snapshot": _snapshot(job_dir)}


def op_poll(req):
    out = {}
    for key, offset in req["keys"].items():
        job_dir = os.path.join(req["root"], key)
        entry = {"snapshot": _snapshot(job_dir), "log": "", "log_offset": 0}
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
    job_dir = os.path.join(req["root"], req["key"])
    snap = _snapshot(job_dir)
    if snap["job"] is None or snap["exit"] is not None:
        return {"snapshot": snap}
    _write_json(os.path.join(job_dir, "stop.json"), {"requested_at": time.time()})
    launch, wrapper = snap["launch"] or {}, snap["wrapper"] or {}
    pid = launch.get("pid") or wrapper.get("pid")
    if snap["alive"]:  # only a process whose start time the ledger recorded
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + float(req["grace_s"]) + 5.0
    while time.monotonic() < deadline:
        snap = _snapshot(job_dir)
        if snap["exit"] is not None or not snap["alive"]:
            return {"snapshot": snap}
        time.sleep(0.1)
    # The wrapper did not finish in time: kill both groups this ledger started, nothing else.
    for pgid in (wrapper.get("child_pgid"), pid if _alive(launch, wrapper) else None):
        if pgid:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    time.sleep(0.1)
    return {"snapshot": _snapshot(job_dir)}


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
       "port": op_port, "get": op_get}


def main(op):
    req = json.load(sys.stdin)
    req["root"] = os.path.abspath(os.path.expanduser(req["root"]))  # ssh starts in $HOME
    if req.get("run"):
        req["run"] = os.path.abspath(os.path.expanduser(req["run"]))
    if op in ("pack", "pack_dir"):
        (op_pack if op == "pack" else op_pack_dir)(req)
        return 0
    json.dump(OPS[op](req), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
