"""Install (or uninstall) merged kernel configs on the host where the SGLang server runs.

Standalone (stdlib only): written into the run folder as ``tuning/install_configs.py`` (reviewable)
and run as a job, so configs land in the SGLang *on the GPU host*; tools/tuning/install.py runs the
same code locally. Both write ``<run>/tuning/manifest.json`` (backups in ``<run>/tuning/backup/``):

    python3 install_configs.py install RUN_DIR INSTALLED_BY [--config-dir D] [--sglang-python P]
                                       [--sglang-src S] MERGED.json...
    python3 install_configs.py uninstall RUN_DIR [--force]

All or nothing, and a kill anywhere is recovered: the manifest states the intent (``installing``,
``uninstalling``) before the first file changes, so the next run finishes it, and a file we wrote
is known by its hash, never backed up as an original. The manifest is run-folder data, so only
kernel configs directly in one of SGLang's config folders are touched, and uninstall writes or
removes only files this host's state folder records as ours (a crafted manifest gets nothing
deleted); a file changed since the install is left alone unless ``--force``. Exit 0 on success,
2 on a problem the user can fix (message on stderr).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time

# host_rules: begin (the script written for the GPU host has host_rules.py in place of these lines)
try:
    from tools.tuning.host_rules import (BACKUP_DIR, MANIFEST, Problem, check_config, check_manifest, config_dir,
                                         forget_install, inside, install_layer, installed_by_us, kept_below,
                                         record_install)
except ImportError:  # run as a script from its own folder, beside host_rules.py
    from host_rules import (BACKUP_DIR, MANIFEST, Problem, check_config, check_manifest, config_dir, forget_install,
                            inside, install_layer, installed_by_us, kept_below, record_install)
# host_rules: end


def reason(err):
    return getattr(err, "strerror", None) or err


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load(run):
    if not os.path.exists(os.path.join(run, MANIFEST)):
        return None
    with open(os.path.join(run, MANIFEST)) as f:
        return json.load(f)


def save(run, manifest):
    path = os.path.join(run, MANIFEST)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), ".manifest.json.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(manifest, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def temporary(target):  # where replace() copies first; a kill may leave it, current() removes it
    return os.path.join(os.path.dirname(target), ".%s.dsv4-tmp" % os.path.basename(target))


def replace(source, target):
    shutil.copyfile(source, temporary(target))
    os.replace(temporary(target), target)


def current(target):
    """The target's hash now (None: absent), after removing a temporary copy a kill left beside it."""
    if os.path.exists(temporary(target)):
        os.unlink(temporary(target))
    return sha256(target) if os.path.exists(target) else None


def original(entry, run, now):
    """True when the target holds what was there before the install (the backup, or nothing)."""
    if entry["backup"]:
        return now is not None and now == sha256(os.path.join(run, entry["backup"]))
    return now is None


def restore(entry, run):
    if entry["backup"]:
        replace(os.path.join(run, entry["backup"]), entry["target"])
    elif os.path.exists(entry["target"]):
        os.unlink(entry["target"])


def put_back(below, target):
    """The target as it was below an install: ``below``'s content, or absent when ``below`` is None."""
    if below is not None:
        replace(below, target)
    elif os.path.exists(target):
        os.unlink(target)


def plan_entries(run, folder, merged):
    """The manifest entries, with a backup of every file a config will replace (taken now)."""
    if not os.path.isdir(folder):
        raise Problem("SGLang config folder %s does not exist; check --sglang-src / --sglang-python point at the "
                      "SGLang the server runs" % folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Problem("cannot write to SGLang's config folder %s on this host; run as a user who owns that SGLang "
                      "install, then re-run - nothing was installed" % folder)
    entries = []
    for path in merged:
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
                              "- nothing was installed" % (target, os.path.join(run, BACKUP_DIR), reason(err))) from err
        entries.append({"name": name, "target": target, "source": os.path.abspath(path), "sha256": sha256(path),
                        "backup": backup})
    return entries


def same_install(manifest, folder, merged):
    recorded = {(e["name"], e["sha256"]) for e in manifest["entries"]}
    return (os.path.realpath(manifest["config_dir"]) == os.path.realpath(folder)
            and recorded == {(os.path.basename(p), sha256(p)) for p in merged})


def install(args):
    """All or nothing; an install a kill interrupted (manifest 'installing') is finished, never redone."""
    run = os.path.abspath(args.run)
    for path in args.merged:
        check_config(path)  # everything is validated before anything is touched
    folder = config_dir(args)
    manifest = load(run)
    if manifest is not None and manifest["state"] == "uninstalling":
        raise Problem("an uninstall of this run was interrupted; run `dsv4-agent tuning uninstall RUN` to finish it")
    if manifest is not None and manifest["state"] in ("installing", "installed"):
        check_manifest(manifest, run)  # finishing or undoing it writes what it names
        if same_install(manifest, folder, args.merged):
            return finish(run, manifest)
        if manifest["state"] == "installed":
            raise Problem("this run already installed other configs into %s; `dsv4-agent tuning uninstall RUN` "
                          "first" % manifest["config_dir"])
        undo(run, manifest, force=False)  # a different install was cut short: take it back first
    began_at = getattr(args, "began_at", None) or time.time()  # the agent's gate time, when it runs us in-process
    manifest = {"version": 1, "state": "installing", "config_dir": folder, "created_at": began_at,
                "entries": plan_entries(run, folder, args.merged), "notes": [], "installed_by": args.installed_by}
    save(run, manifest)  # the intent, before the first copy: a kill from here on is finished or undone
    return finish(run, manifest)


def finish(run, manifest):
    done = []
    try:
        for entry in manifest["entries"]:
            now = current(entry["target"]) if inside(entry, manifest) else None
            if not inside(entry, manifest) or not (now == entry["sha256"] or original(entry, run, now)):
                raise Problem("%s changed since this install began (or is not in %s); nothing more was installed: "
                              "`dsv4-agent tuning uninstall RUN` undoes the rest" % (entry["target"], manifest["config_dir"]))
            if now != entry["sha256"]:
                if not installed_by_us(entry, run):
                    record_install(entry, run)  # outside the run folder, before the file is written
                replace(entry["source"], entry["target"])
            done.append(entry)
    except OSError as err:
        for entry in reversed(done):
            restore(entry, run)
            forget_install(entry, run)
        failed = manifest["entries"][len(done)]["name"]
        manifest["state"] = "rolled_back"
        manifest["notes"].append("install failed at %s: %s; the %d files already written were restored"
                                 % (failed, err, len(done)))
        save(run, manifest)
        raise Problem("could not install %s into %s (%s); rolled back the %d files already written, nothing is "
                      "installed. Fix the folder and re-run" % (failed, manifest["config_dir"], reason(err), len(done))
                      ) from err
    manifest["state"] = "installed"
    save(run, manifest)
    return {"state": "installed", "config_dir": manifest["config_dir"], "files": len(manifest["entries"])}


def undo(run, manifest, force):
    """Put back what each target held before this run's install; 'uninstalling' first, so a kill is
    finished later. A later run's install over a target keeps it: this run's layer is only dropped."""
    if manifest["state"] != "uninstalling":
        manifest["was"], manifest["state"] = manifest["state"], "uninstalling"
        save(run, manifest)
    result = {"restored": [], "removed": [], "released": [], "left_alone": [], "not_ours": [], "note": ""}
    for entry in manifest["entries"]:
        outcome = undo_entry(entry, run, manifest, force)
        if outcome is not None:
            result[outcome].append(entry["target"])
    manifest["state"] = "uninstalled" if not (result["left_alone"] or result["not_ours"]) else "uninstalling"
    save(run, manifest)
    return result


def undo_entry(entry, run, manifest, force):
    """What became of one target: restored/removed (back to what it held before), released (a later
    install holds it), left_alone (changed since), not_ours (no record of ours), None (never written)."""
    if not inside(entry, manifest):
        return "not_ours"
    now = current(entry["target"])
    layer, top = install_layer(entry, run)
    if layer is None:  # never recorded (an install killed first), or a killed uninstall already undid it
        if not original(entry, run, now):
            return "not_ours"  # even --force: only what we recorded installing
        return None if manifest.get("was") == "installing" else ("restored" if entry["backup"] else "removed")
    if not top:
        forget_install(entry, run)
        return "released"
    below = kept_below(entry, run, layer)
    was_below = now == layer.get("below_sha256")
    if not was_below and now != entry["sha256"] and not force:
        return "left_alone"
    if not was_below:
        put_back(below, entry["target"])
    forget_install(entry, run)
    if was_below and manifest.get("was") == "installing":
        return None  # the interrupted install had not written this file yet
    return "restored" if below is not None else "removed"


def uninstall(args):
    run = os.path.abspath(args.run)
    manifest = load(run)
    if manifest is None:
        raise Problem("no install manifest at %s on this host: this run installed no kernel configs there"
                      % os.path.join(run, MANIFEST))
    if manifest["state"] in ("uninstalled", "rolled_back"):
        return {"restored": [], "removed": [], "released": [], "left_alone": [], "not_ours": [],
                "note": "nothing to do: the install is already %s" % manifest["state"].replace("_", " ")}
    check_manifest(manifest, run)
    result = undo(run, manifest, args.force)
    notes = []
    if result["left_alone"]:
        notes.append("%d files changed since this run installed them and were left alone; `dsv4-agent tuning "
                     "uninstall RUN --force` puts back what they held before" % len(result["left_alone"]))
    if result["not_ours"]:
        notes.append("%d files lie outside the run's config folder or have no record in the agent's state folder "
                     "that this run installed them, and were left alone (--force does not touch them either): "
                     "check them and restore them by hand" % len(result["not_ours"]))
    if result["released"]:
        notes.append("%d files hold a later run's install and keep it; uninstalling that run puts back what they "
                     "held before this one" % len(result["released"]))
    result["note"] = "; ".join(notes)
    if notes:
        manifest["notes"].append(result["note"])
        save(run, manifest)
    return result


def main(argv):
    parser = argparse.ArgumentParser(prog="install_configs.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="op", required=True)
    put = sub.add_parser("install")
    for name in ("run", "installed_by", "--config-dir", "--sglang-python", "--sglang-src"):
        put.add_argument(name)
    put.add_argument("merged", nargs="+")
    sub.add_parser("uninstall").add_argument("run")
    sub.choices["uninstall"].add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    try:
        print(json.dumps((install if args.op == "install" else uninstall)(args)))
    except Problem as err:
        print("error: %s" % err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
