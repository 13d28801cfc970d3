"""Reads of the SGLang tree are bounded and confined: nothing outside the source root is read through
a symlinked module or test, only regular files are opened (a FIFO named like a module must not hang
``mtp``, in the research cache's hashing or anywhere else), and a file over the 4 MB cap is skipped and
named in ``unknowns``. Real files, links and FIFOs in a copy of the fixture checkout; the CLI runs
as the user runs it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slowdown import limit
from tools.base import ToolError
from tools.source.read import ReadSourceFileArgs, read_source_file

FIXTURE = Path(__file__).parent / "fixtures" / "evidence" / "checkout"
REPO = Path(__file__).resolve().parents[1]
MODEL = "acme/Moe-Outside-7B"

LAUNCH = '''from sglang.test.test_utils import DEFAULT_URL_FOR_TEST, CustomTestCase, popen_launch_server
{imports}

class {name}(CustomTestCase):
    @classmethod
    def setUpClass(cls):
        cls.process = popen_launch_server(
            "{model}",
            DEFAULT_URL_FOR_TEST,
            other_args=["--speculative-algorithm", "EAGLE", *{args}],
        )
'''


def _mtp(root: Path, model: str, *more: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DSV4_CACHE_DIR": str(cache)}  # the research cache's hashing runs too
    env.pop("DSV4_RESEARCH_CACHE", None)
    return subprocess.run([str(Path(sys.executable).parent / "dsv4-agent"), "mtp", "--sglang", str(root),
                           "--model", model, "--json", *more], cwd=REPO, capture_output=True, text=True,
                          timeout=limit(120), env=env)  # a bound for a hang, not a timing


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(FIXTURE, root)
    return root


def test_a_symlinked_module_outside_the_tree_is_not_read(tree, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "outside_args.py").write_text('OUTSIDE_ARGS = ["--speculative-num-steps", "9", '
                                             '"--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "10"]\n')
    os.symlink(outside / "outside_args.py", tree / "python/sglang/test/outside_args.py")
    (tree / "test/registered/test_acme_outside.py").write_text(LAUNCH.format(
        imports="from sglang.test.outside_args import OUTSIDE_ARGS\n", name="TestAcmeOutside", model=MODEL,
        args="OUTSIDE_ARGS"))
    os.symlink(outside / "outside_args.py", tree / "test/registered/test_linked_speculative.py")  # a linked test
    done = _mtp(tree, MODEL, "--arch", "AcmeMoeForCausalLM", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "9" not in json.dumps([c["flags"] for c in answer["candidates"]])
    assert any("python/sglang/test/outside_args.py: skipped, it resolves outside the source root" in u
               for u in answer["unknowns"]), answer["unknowns"]
    assert not any("test_linked_speculative" in json.dumps(c) for c in answer["candidates"])
    assert str(outside) not in done.stdout  # neither read nor cited


def test_a_fifo_named_like_a_module_does_not_hang_mtp(tree, tmp_path):
    for fifo in (tree / "test/registered/test_fifo_speculative.py", tree / "python/sglang/test/fifo_module.py"):
        os.mkfifo(fifo)
    done = _mtp(tree, "acme/Moe-Mtp-7B", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recommended"] is not None
    with pytest.raises(ToolError, match="not a regular file"):
        read_source_file(ReadSourceFileArgs(root=str(tree), path="python/sglang/test/fifo_module.py"))


def test_a_file_over_the_cap_is_skipped_and_named(tree, tmp_path):
    big = tree / "test/registered/test_acme_big.py"
    padding = "# " + "x" * 98 + "\n"
    big.write_text(LAUNCH.format(imports="", name="TestAcmeBig", model="acme/Moe-Big-7B",
                                 args='["--speculative-num-steps", "2"]') + padding * 45_000)  # 4.5 MB
    done = _mtp(tree, "acme/Moe-Big-7B", "--arch", "AcmeMoeForCausalLM", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert any(u.startswith("test/registered/test_acme_big.py: skipped, 5 MB, over the 4 MB cap per file")
               for u in answer["unknowns"]), answer["unknowns"]
    assert not any("TestAcmeBig" in c["name"] for c in answer["candidates"])
    with pytest.raises(ToolError, match="over the 4 MB cap"):
        read_source_file(ReadSourceFileArgs(root=str(tree), path="test/registered/test_acme_big.py"))
