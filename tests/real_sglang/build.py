"""What the real-SGLang tier needs beside the sglang venv, built once and cached by content.

- **A stub ``libcuda.so.1``.** The PyPI sgl-kernel is a CUDA build: its ``__init__`` loads an
  extension linked against the CUDA driver library, which a machine without a GPU lacks. The stub
  defines every ``cu*`` symbol those extensions import (read with ``nm`` from the installed
  wheel, so a newer sgl-kernel gets its new symbols) as a function returning
  CUDA_ERROR_NO_DEVICE (100). torch never loads it: ``torch.cuda.is_available()`` stays False.
- **A tiny model** (tests/real_sglang/make_tiny_model.py, run by the venv's own python).

Both live under ``<cache>/real-sglang/<what>-<content hash>/`` (the hash covers what builds them
and the sglang venv's kernel files), written into a ``.partial`` folder and renamed, under a file
lock, so parallel test workers build each once and a cut-short build is never used.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE
# Called while sgl_kernel loads its extensions, whether or not an extension imports them.
ALWAYS = ("cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDriverGetVersion", "cuGetProcAddress_v2")


def _kernel_libraries(venv: Path) -> list[Path]:
    return sorted(p for p in venv.glob("lib/python3*/site-packages/sgl_kernel/**/*.so"))


def _cuda_symbols(libraries: list[Path]) -> list[str]:
    names = set(ALWAYS)
    for lib in libraries:
        listed = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True,
                                check=True).stdout
        names.update(line.split()[-1].split("@")[0] for line in listed.splitlines()
                     if line.split() and line.split()[-1].startswith("cu") and line.split()[-1][2:3].isupper())
    return sorted(names)


def _cached(what: str, digest: str, make) -> Path:
    base = Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent") / "real-sglang"
    base.mkdir(parents=True, exist_ok=True)
    target = base / f"{what}-{digest[:16]}"
    with open(base / f".{what}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building the same thing
        if not target.is_dir():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            make(partial)
            os.replace(partial, target)
    return target


def cuda_stub(venv: Path) -> Path:
    """The folder holding the stub ``libcuda.so.1`` (put it on LD_LIBRARY_PATH)."""
    libraries = _kernel_libraries(venv)
    symbols = _cuda_symbols(libraries)
    source = "".join(f"int {name}(void) {{ return {NO_DEVICE}; }}\n" for name in symbols)

    def make(folder: Path) -> None:
        folder.mkdir()
        (folder / "stub.c").write_text(source)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libcuda.so.1"), str(folder / "stub.c")],
                       check=True, capture_output=True)

    return _cached("libcuda-stub", hashlib.sha256(source.encode()).hexdigest(), make)


def tiny_model(python: Path, package: Path) -> Path:
    """A tiny Llama checkpoint folder (config.json, weights, tokenizer, chat template)."""
    script = HERE / "make_tiny_model.py"
    version = (package / "version.py").read_bytes() if (package / "version.py").exists() else b""
    digest = hashlib.sha256(script.read_bytes() + version).hexdigest()

    def make(folder: Path) -> None:
        done = subprocess.run([str(python), str(script), str(folder), str(package)], capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        if done.returncode != 0:
            raise RuntimeError(f"building the tiny model failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")

    return _cached("tiny-llama", digest, make)
