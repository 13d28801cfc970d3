"""The real-SGLang tier: SGLang 0.5.23 from PyPI serving a tiny model on this CPU machine.

Everything here is real: the sglang venv .ci/run builds, ``python -m sglang.launch_server``, its
bench client and GSM8K check. What makes a CUDA build of SGLang serve without a GPU is three
settings (tests/real_sglang/build.py builds the stub): ``SGLANG_USE_CPU_ENGINE=1``; ``--device cpu
--attention-backend torch_native`` (the x86 default needs CPU kernel ops only a CPU build of
sgl-kernel has); a stub ``libcuda.so.1`` on ``LD_LIBRARY_PATH``. Speculative decoding does not run
on CPU with the PyPI packages, so the tier covers the baseline and everything around a server.

Each server start is minutes of imports; every module starts at most one server, and its tests
share it (tests/xdist_groups.py keeps a module's tests on one worker).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.real_sglang.build import cuda_stub, tiny_model
from tests.slowdown import limit

# A quiet machine's seconds (tests/slowdown.py scales them): a real start imports torch and SGLang
# twice (launcher, then scheduler), minutes on a busy machine.
STARTUP_S = 500.0
# pytest-timeout of a test of the tier, before scaling: the module's shared server starts in its first test.
TIER_TIMEOUT_S = 800
TIER = [pytest.mark.real_sglang, pytest.mark.timeout(TIER_TIMEOUT_S)]  # each module's pytestmark
CPU_SERVER_ARGS = ("--device cpu --attention-backend torch_native --max-total-tokens 4096 "
                   "--max-running-requests 8 --log-level info")



@dataclass(frozen=True)
class RealSglang:
    python: Path
    package: Path
    stub_dir: Path
    model: Path
    server_args: tuple[str, ...] = (CPU_SERVER_ARGS,)
    env: dict[str, str] = field(default_factory=dict)

    def agent_args(self) -> list[str]:
        """The CPU settings as the agent's own options (--server-arg, --server-env)."""
        words = []
        for entry in self.server_args:
            words += ["--server-arg", entry]
        for name, value in self.env.items():
            words += ["--server-env", f"{name}={value}"]
        return words

    def launch_argv(self, port: int) -> list[str]:
        return [str(self.python), "-m", "sglang.launch_server", "--model-path", str(self.model),
                "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", *" ".join(self.server_args).split()]


@pytest.fixture(scope="session")
def real_sglang(sglang_python) -> RealSglang:
    venv = sglang_python.parent.parent
    package = Path(subprocess.run([str(sglang_python), "-c", "import importlib.util as u; "
                                   "print(u.find_spec('sglang').submodule_search_locations[0])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    stub = cuda_stub(venv)
    return RealSglang(python=sglang_python, package=package, stub_dir=stub, model=tiny_model(sglang_python, package),
                      env={"SGLANG_USE_CPU_ENGINE": "1", "LD_LIBRARY_PATH": str(stub)})


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=limit(5)) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class ForeignServer:
    """A real SGLang server the test starts itself, in its own session: to the agent, someone else's."""

    def __init__(self, sglang: RealSglang, port: int, log: Path):
        self.port, self.url, self.log = port, f"http://127.0.0.1:{port}", log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(sglang.launch_argv(port), stdout=out, stderr=subprocess.STDOUT,
                                            env={**os.environ, **sglang.env, "HF_HUB_OFFLINE": "1"},
                                            start_new_session=True)

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + limit(STARTUP_S)
        while not healthy(self.url):
            if self.process.poll() is not None:
                raise AssertionError(f"the real server exited ({self.process.returncode}):\n"
                                     f"{self.log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the real server was not healthy after {limit(STARTUP_S):g} s:\n"
                                     f"{self.log.read_text()[-4000:]}")
            time.sleep(1)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=limit(60))
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def plan_args(sglang: RealSglang, *extra: str) -> list[str]:
    """A campaign measuring the baseline of the tiny model with the real SGLang (no GPU here: add --target-gpus 1)."""
    model = str(sglang.model)
    return ["benchmark", "--sglang", str(sglang.package), "--sglang-python", str(sglang.python), "--model", model,
            "--model-path", model, "--tokenizer", model, "--concurrency", "1,2",
            "--input-len", "16", "--output-len", "16", "--prompts-per-concurrency", "2", "--min-prompts", "2",
            "--repeats", "1", *sglang.agent_args(), *extra]


def gsm8k_file(folder: Path) -> Path:
    """A local GSM8K-format file, so SGLang's check downloads nothing."""
    import json

    data = folder / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?", "answer": f"{i}+{i}={2 * i}\n#### {2 * i}"})
                            + "\n" for i in range(1, 9)))
    return data


def alive_in_group(pgid: int) -> list[int]:
    """Processes still in the process group (from /proc): none once a server's whole tree is gone."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry.name))
    return alive
