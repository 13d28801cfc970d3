"""Is the server answering on a port the one we launched? Two independent checks, both required:

1. *Ownership*: a process of the server job's own process group holds the listening socket
   (``processes.group_listens``, read from ``/proc`` where the server runs). A port can be taken by
   someone else between the moment we found it free and the moment a server that loads a model
   for minutes binds it; then our server fails to bind while the other one answers.
2. *Identity*: ``/server_info`` (``/get_server_info`` on builds without it) reports the model path
   and the speculative settings we launched. SGLang 0.5.23 answers the resolved field values
   (``model_path``, ``speculative_algorithm``, ``speculative_num_steps``, ...) and
   ``launch_command``, the arguments as given (``srt/entrypoints/http_server.py: server_info``,
   ``srt/utils/common.py: build_server_info``); the arguments are compared when present, the
   resolved fields otherwise.

Standalone (stdlib only): the agent imports it, and ``write_scripts`` writes it, with
``tools/jobs/processes.py`` in front, into the run folder as ``server_check.py`` for
``run_measure.sh``, whose commands are:

    python3 server_check.py start-time PID            the kernel start time of PID
    python3 server_check.py free-port HOST            a port free on HOST right now
    python3 server_check.py port-taken HOST PORT      exit 0 when something listens there
    python3 server_check.py ours URL PORT PGID START EXPECT_JSON
        exit 0: our server answers; 3: something else answers (reason on stderr); 1: no answer yet
"""
import json
import socket
import sys
import urllib.error
import urllib.request

try:
    from tools.jobs import processes
except ImportError:  # the run folder's copy: processes.py's functions are defined above this module
    processes = sys.modules[__name__]

INFO_PATHS = ("/server_info", "/get_server_info")


def expected_identity(model_path, flags):
    """What our server must report: its model path and its ``--speculative-*`` flags (flag -> value)."""
    return {"model_path": model_path,
            "speculative": {f: v for f, v in flags.items() if f.startswith("--speculative-")}}


def fetch_info(url, timeout_s=5.0):
    """The server's /server_info (or /get_server_info) as a dict; None when neither answers."""
    for path in INFO_PATHS:
        try:
            with urllib.request.urlopen(url + path, timeout=timeout_s) as response:
                info = json.loads(response.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as err:
            if err.code == 404:
                continue
            return None
        except (OSError, ValueError):
            return None
        if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
            info = info["decode"][0]  # disaggregated serving: the decode server's view
        return info if isinstance(info, dict) else None
    return None


def _argument(words, flag):
    """The value given for ``flag`` in an argument list (``--flag v`` or ``--flag=v``); None if absent."""
    for i, word in enumerate(words):
        if word == flag:
            return words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
        if word.startswith(flag + "="):
            return word[len(flag) + 1:]
    return None


def identity_problem(info, expected):
    """'' when ``info`` (a /server_info answer) describes the server we launched, else what differs."""
    command = info.get("launch_command")
    if isinstance(command, str) and command.strip():
        words = command.split()
        names = {word.split("=", 1)[0] for word in words if word.startswith("--speculative-")}
        given = {name: _argument(words, name) for name in names}
        model = _argument(words, "--model-path") or _argument(words, "--model")
        where = "its launch_command"
    else:
        given = {}
        for field, value in info.items():
            if field.startswith("speculative_") and value not in (None, "", False):
                given["--" + field.replace("_", "-")] = str(value)
        model = info.get("model_path")
        where = "its resolved settings"
        if not expected["speculative"] and info.get("speculative_algorithm") is None:
            given = {}  # fields with defaults (e.g. a draft token count) mean nothing without an algorithm
    if str(model) != str(expected["model_path"]):
        return "it serves model %r, not %r (%s)" % (model, expected["model_path"], where)
    for flag, value in expected["speculative"].items():
        got = given.get(flag)
        if got is None or (value != "" and str(got).lower() != str(value).lower()):
            return "it runs with %s %s, not %s (%s)" % (flag, "unset" if got is None else got, value, where)
    if not expected["speculative"] and given.get("--speculative-algorithm") not in (None, "", "None"):
        return "it runs speculative decoding (%s), not the baseline (%s)" % (given["--speculative-algorithm"], where)
    return ""


def port_taken(host, port):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, int(port))) == 0


def ours(url, port, pgid, start, expected):
    """(exit status, message) of the ``ours`` command: 0 ours, 3 someone else's, 1 no answer yet."""
    info = fetch_info(url)
    if info is None:
        return 1, ""
    if not processes.group_listens(int(pgid), start, int(port)):
        return 3, "port %s answers, but no process of our server's group (%s) listens on it: another process holds it" % (port, pgid)
    problem = identity_problem(info, expected)
    return (3, "the server on port %s is not the one we launched: %s" % (port, problem)) if problem else (0, "")


def main(argv):
    command, args = argv[0], argv[1:]
    if command == "start-time":
        print(processes.start_time(int(args[0])) or "")
        return 0
    if command == "free-port":
        print(processes.free_port(args[0]))
        return 0
    if command == "port-taken":
        return 0 if port_taken(args[0], args[1]) else 1
    if command == "ours":
        code, message = ours(args[0], args[1], args[2], args[3] or None, json.loads(args[4]))
        if message:
            sys.stderr.write(message + "\n")
        return code
    sys.stderr.write("usage: server_check.py start-time|free-port|port-taken|ours ...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
