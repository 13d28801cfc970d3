"""Import shim that runs SGLang's REAL bench client (``python -m sglang.bench_serving``) from the
unpacked sglang 0.5.23 wheel without installing sglang or torch. Test-only.

    python bench_client_shim.py [--shim-module sglang.benchmark.serving] [bench_serving arguments...]

``--shim-module`` picks the module run as ``__main__`` (default ``sglang.bench_serving``, the
deprecated name; ``sglang.benchmark.serving`` is where 0.5.23 keeps the client).

The client code (``sglang/bench_serving.py`` -> ``sglang/benchmark/serving.py`` and its datasets,
metrics and JSONL writer) runs unmodified. Only imports it does not need for a text benchmark are
stubbed, each one listed here:

1. ``sglang/__init__.py`` is not executed: ``sglang`` is registered as a bare package whose
   ``__path__`` is the wheel's ``sglang/`` folder (the real ``__init__`` imports the runtime: torch).
   Same for ``sglang.srt.utils`` (its ``__init__`` star-imports ``common.py``, which imports torch);
   ``sglang.srt.utils.network`` itself is the real module.
2. ``sglang.srt.disaggregation.utils`` (torch, distributed) is replaced by a module holding only
   ``FAKE_BOOTSTRAP_HOST``, with the value read from the wheel's source text.
3. ``datasets`` (Hugging Face datasets, used only by the MMMU dataset) is a module whose
   ``load_dataset`` raises.

Everything else the client imports is real (aiohttp, msgspec, numpy, orjson, requests, tqdm,
transformers, pybase64, PIL, psutil, pyzmq: the ``test`` extra pins them). The wheel folder is
``$DSV4_SGLANG_WHEEL_ROOT`` or the cache of ``tools/source/resolve.py``.

Fault knob (test-only, for recovery tests): ``DSV4_DOUBLE_BENCH_CRASH_ONCE=MARKER`` makes the
first client started while MARKER is absent create it and crash (exit 1, before any request), as
a client does that hits a transient error; later clients run normally.
``DSV4_DOUBLE_BENCH_CALLS=FILE`` appends the ``--tag`` of every client started (to count runs).

Bytecode of the wheel's modules is kept in the cache (``bench-client-bytecode/``), not beside them:
the wheel folder stays a clean corpus, and a client does not compile SGLang's benchmark modules
again each time (about 0.4 s of CPU per client, 60-odd clients per test suite).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import runpy
import sys
import types
import warnings
from pathlib import Path

WHEEL_VERSION = "0.5.23"


def _cache() -> Path:
    return Path(os.environ.get("DSV4_CACHE_DIR") or Path.home() / ".cache" / "dsv4-agent")


def wheel_root() -> Path:
    explicit = os.environ.get("DSV4_SGLANG_WHEEL_ROOT")
    if explicit:
        return Path(explicit)
    return _cache() / "sglang-src" / f"sglang-{WHEEL_VERSION}"


class _BytecodeElsewhere(importlib.machinery.SourceFileLoader):
    """Loads a wheel module with its bytecode kept under ``BYTECODE``, named by the source's path,
    size and mtime and by this interpreter's bytecode version: an edited or replaced file is compiled
    anew. Written through a temporary file and a rename, so clients starting together never read a
    torn one."""

    BYTECODE = _cache() / "bench-client-bytecode"

    def get_code(self, fullname):
        source = self.get_filename(fullname)
        stat = os.stat(source)
        where = hashlib.blake2b(source.encode(), digest_size=6).hexdigest()
        name = f"{fullname}-{where}-{stat.st_size}-{stat.st_mtime_ns}-{importlib.util.MAGIC_NUMBER.hex()}"
        cached = self.BYTECODE / name
        try:
            return marshal.loads(cached.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = self.source_to_code(self.get_data(source), source)
        try:
            self.BYTECODE.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{name}.{os.getpid()}.tmp")
            partial.write_bytes(marshal.dumps(code))
            os.replace(partial, cached)
        except OSError:
            pass  # a read-only cache costs a compile, nothing else
        return code


def _bytecode_elsewhere_for(pkg: Path):
    """A path hook for the wheel's package folders only; every other folder keeps Python's own."""
    def hook(path: str):
        if not Path(path).is_relative_to(pkg):
            raise ImportError(path)
        return importlib.machinery.FileFinder(path, (_BytecodeElsewhere, importlib.machinery.SOURCE_SUFFIXES))
    return hook


def _bare_package(name: str, folder: Path) -> None:
    module = types.ModuleType(name)
    module.__path__ = [str(folder)]
    module.__package__ = name
    sys.modules[name] = module


def install(root: Path) -> None:
    pkg = root / "sglang"
    # The wheel folder is a corpus the tests copy whole (tests/shared_trees.py): the client's imports
    # from it must not leave __pycache__ folders in it, whatever the environment says.
    sys.dont_write_bytecode = True
    sys.path_hooks.insert(0, _bytecode_elsewhere_for(pkg))
    sys.path_importer_cache.clear()
    if not (pkg / "benchmark" / "serving.py").exists():
        sys.exit(f"bench_client_shim: no sglang wheel at {root} (set DSV4_SGLANG_WHEEL_ROOT)")
    _bare_package("sglang", pkg)
    _bare_package("sglang.srt", pkg / "srt")
    _bare_package("sglang.srt.utils", pkg / "srt" / "utils")
    _bare_package("sglang.srt.disaggregation", pkg / "srt" / "disaggregation")
    source = (pkg / "srt" / "disaggregation" / "utils.py").read_text()
    match = re.search(r'^FAKE_BOOTSTRAP_HOST\s*=\s*"([^"]*)"', source, re.M)
    disagg = types.ModuleType("sglang.srt.disaggregation.utils")
    disagg.FAKE_BOOTSTRAP_HOST = match.group(1) if match else "2.2.2.2"
    sys.modules[disagg.__name__] = disagg
    datasets = types.ModuleType("datasets")

    def load_dataset(*_a, **_k):
        raise RuntimeError("bench_client_shim: Hugging Face 'datasets' is stubbed (MMMU is not supported)")

    datasets.load_dataset = load_dataset
    sys.modules.setdefault("datasets", datasets)


def record_call() -> None:
    calls = os.environ.get("DSV4_DOUBLE_BENCH_CALLS")
    if calls:
        tag = sys.argv[sys.argv.index("--tag") + 1] if "--tag" in sys.argv[:-1] else "?"
        with open(calls, "a") as f:
            f.write(f"{tag}\n")


def crash_once() -> None:
    marker = os.environ.get("DSV4_DOUBLE_BENCH_CRASH_ONCE")
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        sys.exit("bench_client_shim: ConnectionResetError: [Errno 104] Connection reset by peer (double crash)")


def main() -> None:
    record_call()
    crash_once()
    install(wheel_root())
    warnings.simplefilter("ignore", FutureWarning)  # the deprecated-path notice of bench_serving
    args = sys.argv[1:]
    module = "sglang.bench_serving"
    if args[:1] == ["--shim-module"]:
        module, args = args[1], args[2:]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
