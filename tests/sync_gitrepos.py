"""Real git repositories for the sync tests: a bare upstream, a writer clone that pushes new
upstream commits, and user clones (full or shallow) that the code under test pulls.

Nothing here is a double: every repository is made and changed by the real ``git`` binary.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}

PYPROJECT = """[project]
name = "sglang"
version = "0.5.23"
dependencies = [
    "aiohttp",
    "flashinfer_python==0.6.1",
    "sgl-kernel==0.3.21",
    "torch==2.9.1",
    "transformers==4.57.1",
]

[project.optional-dependencies]
test = ["pytest"]
"""


def git(cwd: Path | str, *args: str, check: bool = True) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done.stdout.strip()


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class Upstream:
    """A bare repository plus a writer clone used to publish commits to it."""

    def __init__(self, base: Path, files: dict[str, str] | None = None):
        self.bare = base / "upstream.git"
        self.writer = base / "writer"
        git(base, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(base, "clone", "-q", str(self.bare), str(self.writer))
        git(self.writer, "checkout", "-q", "-b", "main")
        initial = {"python/sglang/__init__.py": "__version__ = '0.5.23'\n",
                   "python/pyproject.toml": PYPROJECT, "README.md": "sglang\n"}
        initial.update(files or {})
        self.commit(initial, "initial import")

    @property
    def url(self) -> str:
        # file:// makes git use the real transport (and lets --depth work), as over the network.
        return self.bare.as_uri()

    def commit(self, files: dict[str, str | None], message: str) -> str:
        """Write (or delete, for None) files in the writer and push one commit upstream."""
        for relative, text in files.items():
            if text is None:
                git(self.writer, "rm", "-q", relative)
            else:
                write(self.writer, relative, text)
                git(self.writer, "add", relative)
        git(self.writer, "commit", "-q", "-m", message)
        git(self.writer, "push", "-q", "origin", "main")
        return git(self.writer, "rev-parse", "HEAD")

    def clone(self, dest: Path, depth: int | None = None) -> Path:
        args = ["clone", "-q"] + (["--depth", str(depth)] if depth else []) + [self.url, str(dest)]
        git(dest.parent, *args)
        return dest


def snapshot(repo: Path) -> dict[str, str]:
    """Everything a sync must leave alone when it refuses or fails."""
    return {
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "-q", "HEAD", check=False),
        "stash": git(repo, "stash", "list"),
        "reflog": git(repo, "reflog", "--format=%H %gs"),
        "branches": git(repo, "for-each-ref", "refs/heads"),
        "refs": git(repo, "for-each-ref"),  # remote-tracking refs too, and nothing left in a private namespace
        "fetch_head": _fetch_head(repo),
        "diff": git(repo, "diff", "HEAD"),
    }


def _fetch_head(repo: Path) -> str | None:
    path = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "FETCH_HEAD"
    return path.read_text() if path.exists() else None


# An upstream built from the real SGLang wheel's files (the hook, the models, the spec registry and a
# registered test), and the upstream change of the hook the recommendation tests make.
HOOK = "python/sglang/srt/arg_groups/deepseek_v4_hook.py"
COPIED = ("__init__.py", "version.py", "srt/__init__.py", "srt/arg_groups", "srt/speculative/spec_info.py",
          "srt/models/deepseek_v4.py", "srt/models/deepseek_v4_nextn.py", "test")
REGISTERED_TEST = '''import unittest

from sglang.test.ci.ci_register import register_cuda_ci
from sglang.test.test_utils import (
    DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
    DEFAULT_URL_FOR_TEST,
    CustomTestCase,
    popen_launch_server,
)

register_cuda_ci(est_time=900, suite="stage-c-test-8-gpu-h200")

DEEPSEEK_V4_FLASH_MODEL_PATH = "deepseek-ai/DeepSeek-V4-Flash"


class TestDeepSeekV4FlashMTP(CustomTestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = DEEPSEEK_V4_FLASH_MODEL_PATH
        cls.base_url = DEFAULT_URL_FOR_TEST
        other_args = [
            "--trust-remote-code",
            "--tp",
            "8",
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
        ]
        cls.process = popen_launch_server(
            cls.model,
            cls.base_url,
            timeout=DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
            other_args=other_args,
        )


if __name__ == "__main__":
    unittest.main()
'''


def sglang_tree(wheel: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for rel in COPIED:
        src = wheel / "sglang" / rel
        paths = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file() and p.suffix == ".py")
        for path in paths:
            files[f"python/sglang/{path.relative_to(wheel / 'sglang').as_posix()}"] = path.read_text()
    files["test/registered/8-gpu-models/test_deepseek_v4_flash_mtp.py"] = REGISTERED_TEST
    return files


def forbid_eagle(hook: str) -> str:
    """Upstream drops EAGLE for DeepSeek-V4: only DSPARK stays allowed."""
    old = '        assert cfg.speculative_algorithm in (\n            "EAGLE",\n            "DSPARK",\n        ), ('
    assert old in hook, "the 0.5.23 hook no longer has the shape this test edits"
    return hook.replace(old, '        assert cfg.speculative_algorithm in (\n            "DSPARK",\n        ), (')
