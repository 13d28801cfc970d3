"""Which processes are ours: process identity by pid *and* kernel start time, process groups, the
owner of a listening TCP port (all read from ``/proc``), and a port free for a server we start.

Standalone (stdlib only): it travels next to ``wrapper.py`` wherever jobs run, and ``remote_ledger.py``
is sent over SSH with this source in front of it. Pids are reused, so a pid is ours only while it has
the start time we recorded; and since a pid and start time can be copied into a forged ledger, every
job also carries a random token in its environment (``carries_token`` reads ``/proc/PID/environ``,
which no ledger can change).
"""
import os
import random
import socket

TOKEN_VARIABLE = "DSV4_JOB_TOKEN"
_MAX_ENVIRON = 4 << 20  # the kernel caps a process's argv + environment well below this


def start_time(pid):
    """The kernel's start time of ``pid`` (clock ticks since boot, as text); None if gone or a zombie."""
    stat = _stat(pid)
    return None if stat is None or stat[0] == "Z" else stat[19]


def process_group(pid):
    """The process group of ``pid``; None if it is gone."""
    stat = _stat(pid)
    return None if stat is None else int(stat[2])


def _stat(pid):
    """Fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open("/proc/%d/stat" % int(pid)) as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    return text[text.rindex(")") + 2:].split()


def carries_token(pid, token):
    """True when ``pid`` was started with our job token in its environment."""
    if not token:
        return False
    try:
        with open("/proc/%d/environ" % int(pid), "rb") as f:
            environ = f.read(_MAX_ENVIRON)
    except (OSError, ValueError):
        return False  # gone, or another user's: not ours either way
    return ("%s=%s" % (TOKEN_VARIABLE, token)).encode() in environ.split(b"\0")


def is_process(pid, recorded_start, token=None):
    """True when ``pid`` runs and is the process whose start time we recorded (never without one);
    with ``token``, also only when it carries that job token."""
    if not (pid and recorded_start is not None and start_time(pid) == str(recorded_start)):
        return False
    return token is None or carries_token(pid, token)


def is_group_leader(pgid, recorded_start, token=None):
    """True when the process group ``pgid`` is the one we created: its leader is the process we
    recorded (pid and start time, and the job token when given) and still leads that group."""
    return is_process(pgid, recorded_start, token) and process_group(pgid) == int(pgid)


def group_members(pgid):
    """Pids whose process group is ``pgid`` (zombies excluded)."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(name)
            if stat is not None and stat[0] != "Z" and int(stat[2]) == int(pgid):
                members.append(int(name))
    return members


def group_alive(pgid, recorded_start, token=None):
    """True while the group we created has a process: its verified leader or, once the leader has
    exited, a member left in it (a group id is not reused while any process is in the group, and
    only processes started after the leader can be in it); with ``token``, only members carrying it."""
    if not pgid or recorded_start is None:
        return False
    if is_group_leader(pgid, recorded_start, token):
        return True
    leader = start_time(pgid)
    if leader is not None and leader != str(recorded_start):
        return False  # the pid was reused by a process that is not our leader
    if leader is not None and token is not None:
        return False  # our leader's pid and start time, without our token: not our group
    floor = int(recorded_start)
    return any(int(start_time(m) or 0) >= floor and (token is None or carries_token(m, token))
               for m in group_members(pgid))


def proven_members(pgid, recorded_start, token):
    """Pids in the group we created that carry our job token: what is left of a job whose leader
    is gone (killed with its wrapper, or ended before the command's children). Never without a
    token: a pid and start time copied from /proc prove nothing."""
    if not (pgid and recorded_start is not None and token):
        return []
    leader = start_time(pgid)
    if leader is not None and (leader != str(recorded_start) or not carries_token(pgid, token)):
        return []  # the pid is another process now (a group id is not reused while the group has members)
    floor = int(recorded_start)
    return [m for m in group_members(pgid) if int(start_time(m) or 0) >= floor and carries_token(m, token)]


def unproven_members(pgid, recorded_start, token):
    """Pids left in the group we created, once its leader is gone, that do not carry our job token
    (a command that cleared its environment, or a group someone else made under a reused id): we
    cannot tell them from someone else's, so they are named, never signalled."""
    if not (pgid and recorded_start is not None) or start_time(pgid) is not None:
        return []
    floor = int(recorded_start)
    return [m for m in group_members(pgid) if int(start_time(m) or 0) >= floor and not carries_token(m, token)]


def _listening_inodes(port):
    """Socket inodes listening on TCP ``port`` (any address, IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                rows = [line.split() for line in f]
        except (OSError, StopIteration):
            continue
        for row in rows:
            if len(row) > 9 and row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == int(port):
                inodes.add(row[9])
    return inodes


def group_listens(pgid, recorded_start, port, token=None):
    """True when a process of our group ``pgid`` holds a socket listening on ``port`` on this host
    (only our group's open files are read: anyone else's listener never counts as ours)."""
    if not group_alive(pgid, recorded_start, token):
        return False
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    wanted = {"socket:[%s]" % inode for inode in inodes}
    for pid in group_members(pgid):
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) in wanted:
                    return True
            except OSError:
                continue
    return False


JOB_DIR_ENV = "DSV4_JOB_DIR"  # set by the executor for the wrapper, and so for the job's leader and command


def processes_of_job(job_dir, recorded=None):
    """Pids of processes started for the job whose ledger folder is ``job_dir`` (the wrapper, the job's
    leader and its command carry ``DSV4_JOB_DIR`` in their environment): what still runs of a job whose
    folder was deleted, so that it is never started a second time beside itself. With ``recorded`` (its
    wrapper.json fields and token, kept elsewhere), also what that proves ours (one that cleared it)."""
    found = set(_with_job_dir(job_dir))
    recorded = recorded if isinstance(recorded, dict) else {}
    token = recorded.get("token")
    try:
        if token and is_process(recorded.get("pid"), recorded.get("start_time"), token):
            found.add(int(recorded["pid"]))
        found.update(proven_members(recorded.get("child_pgid"), recorded.get("child_start_time"), token))
    except (TypeError, ValueError):
        pass  # a damaged record proves nothing
    return sorted(found)


def job_dir_of(pid):
    """The ledger folder ``pid`` was started for (its ``DSV4_JOB_DIR``), or None."""
    try:
        with open("/proc/%d/environ" % int(pid), "rb") as f:
            environ = f.read(_MAX_ENVIRON)
    except (OSError, ValueError, TypeError):
        return None
    prefix = ("%s=" % JOB_DIR_ENV).encode()
    found = [item[len(prefix):] for item in environ.split(b"\0") if item.startswith(prefix)]
    return found[0].decode(errors="replace") if found else None


def _with_job_dir(job_dir):
    wanted = ("%s=%s" % (JOB_DIR_ENV, os.path.abspath(str(job_dir)))).encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                environ = f.read(_MAX_ENVIRON) + b"\0"
        except OSError:
            continue
        if (b"\0" + environ).find(b"\0" + wanted) >= 0 and start_time(name) is not None:
            found.append(int(name))
    return sorted(found)

FIRST_SERVER_PORT = 20000  # ports below this are left to services people configure by hand


def free_port(host="127.0.0.1"):
    """A TCP port nobody holds on ``host`` right now, for a server we are about to start there.

    Picked below the kernel's ephemeral range where there is room: every outgoing connection takes
    its own local port from that range, so a port found free there (what ``bind(0)`` gives) can be
    taken by any client on the machine before the server binds it; below it only listeners compete."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = _ephemeral_low()
    room = range(FIRST_SERVER_PORT, low) if low - FIRST_SERVER_PORT >= 1000 else range(0)
    for port in random.sample(room, min(len(room), 50)):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(family, socket.SOCK_STREAM) as s:  # no room below the range, or all of it taken
        s.bind((host, 0))
        return s.getsockname()[1]


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # unknown: let the kernel pick
