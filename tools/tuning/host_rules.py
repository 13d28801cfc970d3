"""What the host install script may read and touch: SGLang's kernel-config folders, kernel config
file names and contents, and the manifest's entries. Stdlib only: ``host_install.py`` imports it in
the agent and when run from its own folder, and the script written for the GPU host carries it
inlined (``tools/tuning/remote_install.py``).
"""
import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time

try:
    from tools.child_env import child_env
except ImportError:  # inlined into the script a GPU host runs as a job: its environment is a job's already
    def child_env():
        return None  # subprocess's default: this process's environment

MANIFEST = "tuning/manifest.json"
BACKUP_DIR = "tuning/backup"
CONFIG_DIRS = (  # relative to the folder holding sglang/, newest layout first, with the module reading it
    ("sglang/kernels/ops/gemm/configs", "sglang/kernels/ops/gemm/fp8_kernel.py"),
    ("sglang/srt/layers/quantization/configs", "sglang/srt/layers/quantization/fp8_kernel.py"),
)
CONFIG_NAME = re.compile(r"^N=[0-9]+,K=[0-9]+,device_name=[^/\x00-\x1f]+,dtype=[A-Za-z0-9_]+,"
                         r"block_shape=\[[0-9]+, ?[0-9]+\]\.json$")
TRITON_FIELDS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
PROBE = ("import importlib.util as u; s = u.find_spec('sglang'); "
         "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')")


class Problem(Exception):
    """A problem the user can fix; the message names it and the fix."""


def check_config(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise Problem("%s is not readable JSON (%s); re-run the tuning step" % (path, err)) from err
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
            done = subprocess.run([args.sglang_python, "-c", PROBE], capture_output=True, text=True, timeout=60,
                                  env=child_env())
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


def inside(entry, manifest):
    """Only kernel config files (SGLang's names) directly in the recorded config folder, with their
    backups in the run's backup folder, are ever written or removed; any other entry is left alone."""
    name, backup = str(entry.get("name", "")), entry.get("backup")
    return (CONFIG_NAME.match(name) is not None and os.path.basename(str(entry.get("target"))) == name
            and os.path.dirname(os.path.realpath(entry["target"])) == os.path.realpath(manifest["config_dir"])
            and backup in (None, "%s/%s" % (BACKUP_DIR, name)))


def check_manifest(manifest, run):
    """Refuse a manifest whose config folder is not one of SGLang's kernel-config folders (``configs/``
    beside the FP8 kernel module): a run folder is data, and a manifest may name any folder."""
    folder = os.path.realpath(str(manifest.get("config_dir", "")))
    if not any(folder.endswith(os.sep + rel) and os.path.isfile(os.path.join(folder[:-len(rel) - 1], module))
               for rel, module in CONFIG_DIRS):
        raise Problem("%s names %r, which is not one of SGLang's kernel-config folders; nothing was touched. Restore "
                      "the run's manifest, or undo the install by hand" % (os.path.join(run, MANIFEST), folder))


# What the agent installed, recorded where no run folder reaches: the state folder of the user on
# this host (tools/state_dir.py's rule, written out here for the standalone script). A manifest is
# run-folder data anyone can write; an uninstall acts on a target only with a record of ours.
#
# Each target has one record holding every install over it, oldest first (a "layer": the run, what it
# wrote, and what the target held before it, kept as a copy beside the record), so runs that install
# the same config can be uninstalled in any order: the top layer puts back what lay below it, a layer
# under a later one is only dropped, handing what lay below it to the layer above.
def _records():
    root = os.environ.get("DSV4_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"), "dsv4-agent")
    folder = os.path.join(os.path.expanduser(root), "installed")
    for path in (os.path.expanduser(root), folder):
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise Problem("the agent's state folder %s is not a folder of yours that only you may write; fix it "
                          "(or set DSV4_STATE_DIR) - nothing was touched" % path)
    return folder


def _record_file(target):
    return os.path.join(_records(), hashlib.sha256(os.path.realpath(target).encode()).hexdigest()[:40] + ".json")


def _file_sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _layers(target):
    """The installs over ``target``, oldest first (a record of the one-install format is one layer)."""
    try:
        with open(_record_file(target)) as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(record, dict) or record.get("target") != os.path.realpath(target):
        return []
    if "layers" not in record:  # one install, recorded before layers: what lay below it is its backup
        record = {"layers": [dict(record, below_sha256=record.get("backup_sha256"))]}
    layers = record["layers"]
    return [x for x in layers if isinstance(x, dict)] if isinstance(layers, list) else []


def _save_layers(target, layers):
    path = _record_file(target)
    if not layers:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        shutil.rmtree(path[:-len(".json")] + ".d", ignore_errors=True)
        return
    with open(path + ".tmp", "w") as f:
        json.dump({"target": os.path.realpath(target), "layers": layers}, f)
    os.replace(path + ".tmp", path)


def _kept(target, sha):
    """Where the copy of content ``sha`` kept for ``target`` lies (a hash, never a path of the record's)."""
    if not re.fullmatch(r"[0-9a-f]{64}", str(sha)):
        raise Problem("the agent's record of installs over %s is damaged; nothing was touched: restore the file "
                      "by hand" % target)
    return os.path.join(_record_file(target)[:-len(".json")] + ".d", sha)


def _mine(layer, entry, run):
    backup = os.path.join(run, entry["backup"]) if entry["backup"] else None
    return (layer.get("sha256") == entry["sha256"] and layer.get("run") == os.path.realpath(run)
            and layer.get("backup_sha256") == (_file_sha(backup) if backup and os.path.isfile(backup) else None))


def record_install(entry, run):
    """Before a target is written: a layer saying it is ours, with this content, from this run, over what
    the target holds now (kept beside the record, to be put back when this layer is uninstalled)."""
    target = entry["target"]
    below = _file_sha(target) if os.path.isfile(target) else None
    if below is not None and not os.path.exists(_kept(target, below)):
        os.makedirs(os.path.dirname(_kept(target, below)), mode=0o700, exist_ok=True)
        shutil.copyfile(target, _kept(target, below) + ".tmp")
        os.replace(_kept(target, below) + ".tmp", _kept(target, below))
    backup = os.path.join(run, entry["backup"]) if entry["backup"] else None
    layer = {"sha256": entry["sha256"], "run": os.path.realpath(run), "below_sha256": below,
             "backup_sha256": _file_sha(backup) if backup else None, "installed_at": time.time()}
    _save_layers(target, _layers(target) + [layer])


def installed_by_us(entry, run):
    """True when our record holds a layer of this run installing exactly this entry (content and backup)."""
    return any(_mine(layer, entry, run) for layer in _layers(entry["target"]))


def install_layer(entry, run):
    """(this run's layer of the target, whether it is the top one), or (None, False) with no record."""
    layers = _layers(entry["target"])
    for i, layer in enumerate(layers):
        if _mine(layer, entry, run):
            return layer, i == len(layers) - 1
    return None, False


def kept_below(entry, run, layer):
    """The file holding what lay below ``layer`` (None: the target was absent); a record without its copy
    (the one-install format) falls back to the run's backup when that is the content recorded."""
    sha = layer.get("below_sha256")
    if sha is None:
        return None
    for path in (_kept(entry["target"], sha), os.path.join(run, entry["backup"] or "")):
        if os.path.isfile(path) and _file_sha(path) == sha:
            return path
    raise Problem("the copy of what %s held before this run installed it is gone from the agent's state folder; "
                  "nothing was touched: restore the file by hand" % entry["target"])


def forget_install(entry, run):
    """Drop this run's layer; the layer above it (if any) now lies over what lay below this one."""
    layers = _layers(entry["target"])
    for i, layer in enumerate(layers):
        if _mine(layer, entry, run):
            if i + 1 < len(layers):
                layers[i + 1]["below_sha256"] = layer.get("below_sha256")
            del layers[i]
            break
    _save_layers(entry["target"], layers)
