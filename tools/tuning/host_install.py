"""Install (or uninstall) merged kernel configs on the host where the SGLang server runs.

Standalone on purpose (stdlib only, no package imports): the tuning step writes this file into the
run folder as ``tuning/install_configs.py`` (reviewable like every generated script) and runs it as
a job through the executor, so the configs land in the config folder of the SGLang *on the GPU
host*, not on the machine the agent runs on. It does what ``tools/tuning/install.py`` does locally
and writes the same manifest format (``<run>/tuning/manifest.json``, backups in
``<run>/tuning/backup/``), which the agent fetches back into the local run folder:

    python3 install_configs.py install RUN_DIR INSTALLED_BY [--config-dir D] [--sglang-python P]
                                       [--sglang-src S] MERGED.json...
    python3 install_configs.py uninstall RUN_DIR [--force]

Install is all or nothing: every file is validated first, the manifest is written before the first
file is replaced, and a failure restores the files already written. Uninstall restores replaced
files from their backups, removes added ones, and leaves a file changed since the install alone
unless ``--force``. Exit 0 on success, 2 on a problem the user can fix (message on stderr).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

MANIFEST = "tuning/manifest.json"
BACKUP_DIR = "tuning/backup"
CONFIG_DIRS = (  # relative to the folder holding sglang/, newest layout first, with the module reading it
    ("sglang/kernels/ops/gemm/configs", "sglang/kernels/ops/gemm/fp8_kernel.py"),
    ("sglang/srt/layers/quantization/configs", "sglang/srt/layers/quantization/fp8_kernel.py"),
)
TRITON_FIELDS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
PROBE = ("import importlib.util as u; s = u.find_spec('sglang'); "
         "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")


class Problem(Exception):
    """A problem the user can fix; the message names it and the fix."""


def reason(err):
    return getattr(err, "strerror", None) or err


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_config(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise Problem("%s is not readable JSON (%s); re-run the tuning step" % (path, err))
    if not isinstance(data, dict) or not data:
        raise Problem("%s: expected a JSON object mapping M to a Triton config; re-run the tuning step" % path)
    for key, config in data.items():
        good = key.isdigit() and isinstance(config, dict) and all(
            isinstance(config.get(f), int) and not isinstance(config.get(f), bool) and config[f] > 0
            for f in TRITON_FIELDS)
        if not good:
            raise Problem("%s: M=%r is not a valid block-FP8 Triton config; re-run the tuning step" % (path, key))


def package_parent(root):
    for base in (root, os.path.join(root, "python"), os.path.dirname(root)):
        if os.path.exists(os.path.join(base, "sglang", "__init__.py")):
            return base
    return None


def config_dir(args):
    """The folder the host's SGLang reads: explicit, else where its python imports sglang, else the source."""
    if args.config_dir:
        return os.path.realpath(args.config_dir)
    parent = None
    if args.sglang_python:
        try:
            done = subprocess.run([args.sglang_python, "-c", PROBE], capture_output=True, text=True, timeout=60)
            location = done.stdout.strip() if done.returncode == 0 else ""
            parent = os.path.dirname(location) if location else None
        except (OSError, subprocess.TimeoutExpired):
            parent = None
    if parent is None and args.sglang_src:
        parent = package_parent(os.path.abspath(args.sglang_src))
    if parent is None:
        raise Problem("on this host %s has no sglang and no SGLang source was given, so the folder the server "
                      "reads configs from is unknown; pass --sglang-python (the host's) or --sglang-src"
                      % (args.sglang_python or "the SGLang python"))
    for relative, module in CONFIG_DIRS:
        if os.path.exists(os.path.join(parent, module)):
            return os.path.realpath(os.path.join(parent, relative))
    raise Problem("no FP8 kernel module under %s on this host; this SGLang version is not supported by the "
                  "tuning step" % parent)


def save(run, manifest):
    path = os.path.join(run, MANIFEST)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), ".manifest.json.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, path)


def replace(source, target):
    tmp = os.path.join(os.path.dirname(target), ".%s.dsv4-tmp" % os.path.basename(target))
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def restore(entry, run):
    if entry["backup"]:
        replace(os.path.join(run, entry["backup"]), entry["target"])
    elif os.path.exists(entry["target"]):
        os.unlink(entry["target"])


def install(args):
    run = os.path.abspath(args.run)
    for path in args.merged:
        check_config(path)  # everything is validated before anything is touched
    folder = config_dir(args)
    if not os.path.isdir(folder):
        raise Problem("SGLang config folder %s does not exist; check --sglang-src / --sglang-python point at the "
                      "SGLang the server runs" % folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Problem("cannot write to SGLang's config folder %s on this host; run as a user who owns that SGLang "
                      "install, then re-run - nothing was installed" % folder)
    entries = []
    for path in args.merged:
        name = os.path.basename(path)
        target = os.path.join(folder, name)
        backup = None
        if os.path.lexists(target):
            if not os.path.isfile(target):
                raise Problem("%s exists but is not a regular file; move it away and re-run - nothing was "
                              "installed" % target)
            backup = "%s/%s" % (BACKUP_DIR, name)
            try:
                os.makedirs(os.path.join(run, BACKUP_DIR), exist_ok=True)
                shutil.copy2(target, os.path.join(run, backup))
            except OSError as err:
                raise Problem("could not back up %s into %s (%s); free space or fix permissions of the run folder "
                              "- nothing was installed" % (target, os.path.join(run, BACKUP_DIR), reason(err)))
        entries.append({"name": name, "target": target, "source": os.path.abspath(path), "sha256": sha256(path),
                        "backup": backup})
    manifest = {"version": 1, "state": "installing", "config_dir": folder, "created_at": time.time(),
                "entries": entries, "notes": [], "installed_by": args.installed_by}
    save(run, manifest)
    done = []
    try:
        for entry in entries:
            replace(entry["source"], entry["target"])
            done.append(entry)
    except OSError as err:
        for entry in reversed(done):
            restore(entry, run)
        manifest["state"] = "rolled_back"
        manifest["notes"].append("install failed at %s: %s; the %d files already written were restored"
                                 % (entries[len(done)]["name"], err, len(done)))
        save(run, manifest)
        raise Problem("could not install %s into %s (%s); rolled back the %d files already written, nothing is "
                      "installed. Fix the folder and re-run" % (entries[len(done)]["name"], folder, reason(err), len(done)))
    manifest["state"] = "installed"
    save(run, manifest)
    return {"state": "installed", "config_dir": folder, "files": len(entries)}


def uninstall(args):
    run = os.path.abspath(args.run)
    try:
        with open(os.path.join(run, MANIFEST)) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise Problem("no install manifest at %s on this host: this run installed no kernel configs there"
                      % os.path.join(run, MANIFEST))
    result = {"restored": [], "removed": [], "left_alone": [], "note": ""}
    if manifest["state"] in ("uninstalled", "rolled_back"):
        result["note"] = "nothing to do: the install is already %s" % manifest["state"].replace("_", " ")
        return result
    for entry in manifest["entries"]:
        current = sha256(entry["target"]) if os.path.exists(entry["target"]) else None
        if manifest["state"] == "installing" and current != entry["sha256"]:
            continue  # the install stopped before this file was written: the original is still there
        if current != entry["sha256"] and not args.force:
            result["left_alone"].append(entry["target"])
            continue
        restore(entry, run)
        result["restored" if entry["backup"] else "removed"].append(entry["target"])
    if result["left_alone"]:
        result["note"] = ("%d files changed since this run installed them and were left alone; "
                          "`dsv4-agent tuning uninstall RUN --force` restores them anyway" % len(result["left_alone"]))
        manifest["notes"].append(result["note"])
    else:
        manifest["state"] = "uninstalled"
    save(run, manifest)
    return result


def main(argv):
    parser = argparse.ArgumentParser(prog="install_configs.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="op", required=True)
    put = sub.add_parser("install")
    put.add_argument("run")
    put.add_argument("installed_by")
    put.add_argument("--config-dir")
    put.add_argument("--sglang-python")
    put.add_argument("--sglang-src")
    put.add_argument("merged", nargs="+")
    undo = sub.add_parser("uninstall")
    undo.add_argument("run")
    undo.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    try:
        print(json.dumps((install if args.op == "install" else uninstall)(args)))
    except Problem as err:
        print("error: %s" % err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
