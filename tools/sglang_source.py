"""Where the SGLang source comes from. (The evidence-engine work extends this module.)

``ensure_wheel_source(version)`` downloads the sglang wheel from PyPI once into the cache
(``DSV4_CACHE_DIR``, default ``~/.cache/dsv4-agent``) and unpacks it; it returns the folder
that contains ``sglang/``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tools.base import ToolError


def cache_dir() -> Path:
    return Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent")


def ensure_wheel_source(version: str, cache: Path | None = None) -> Path:
    root = (cache or cache_dir()) / "sglang-src" / f"sglang-{version}"
    if (root / "sglang" / "__init__.py").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-d", tmp, f"sglang=={version}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ToolError(f"could not download sglang=={version} from PyPI ({tail[0]}); "
                            "pass --sglang PATH to a checkout or an installed package instead")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(unpacked)
        if root.exists():  # a half-unpacked folder from a crash: replace it
            shutil.rmtree(root)
        os.replace(unpacked, root)  # atomic: a crash never leaves a half-unpacked cache
    return root
