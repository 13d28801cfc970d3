"""The bench-client shim (tests/doubles/bench_client_shim.py) keeps the bytecode of SGLang's client
outside the wheel folder, which the suite shares as a read-only corpus, and never trusts a damaged
entry. Real processes: SGLang's own client prints its --help from the 0.5.23 wheel."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import clean_env
from tests.slowdown import limit

SHIM = Path(__file__).parent / "doubles" / "bench_client_shim.py"


def _client_help(wheel_root: Path, cache: Path) -> subprocess.CompletedProcess:
    env = clean_env({"DSV4_SGLANG_WHEEL_ROOT": str(wheel_root), "DSV4_CACHE_DIR": str(cache)})
    return subprocess.run([sys.executable, str(SHIM), "--shim-module", "sglang.benchmark.serving", "--help"],
                          env=env, capture_output=True, text=True, timeout=limit(120))


def test_bytecode_is_kept_in_the_cache_and_a_torn_entry_is_compiled_again(sglang_wheel_root, tmp_path):
    first = _client_help(sglang_wheel_root, tmp_path)
    assert first.returncode == 0 and "--dataset-name" in first.stdout, first.stderr
    stored = {p.name: p for p in (tmp_path / "bench-client-bytecode").iterdir()}
    serving = [name for name in stored if name.startswith("sglang.benchmark.serving-")]
    assert len(serving) == 1 and not [n for n in stored if n.endswith(".tmp")], sorted(stored)
    assert not list((sglang_wheel_root / "sglang" / "benchmark").rglob("__pycache__"))  # the corpus stays clean

    whole = stored[serving[0]].read_bytes()
    stored[serving[0]].write_bytes(whole[: len(whole) // 2])  # a half-written entry, as a crash would leave
    second = _client_help(sglang_wheel_root, tmp_path)
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr
    assert stored[serving[0]].read_bytes() == whole  # compiled again and stored whole
