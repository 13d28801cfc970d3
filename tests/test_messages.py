"""The message checks of tests/messages.py fail where a message is malformed or lacks a fact."""
from __future__ import annotations

import subprocess

import pytest

from agent.exit_codes import ExitCode
from tests.messages import assert_refusal, mentions, message_naming

LINE = "dsv4-agent: --tp 3 does not divide the target's 8 GPUs; pass --target-gpus N\n"


def _ended(code: int = 2, stderr: str = LINE, stdout: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["dsv4-agent"], code, stdout, stderr)


def test_a_well_formed_refusal_passes_and_gives_its_line():
    assert assert_refusal(_ended(), "--tp 3", "8 GPUs", "--target-gpus N", quiet=True) == LINE.rstrip("\n")
    assert assert_refusal(_ended(1), code=(ExitCode.FAILED, ExitCode.USAGE))


@pytest.mark.parametrize("ended, names", [
    (_ended(1), []),                                                             # another exit code
    (_ended(stderr=LINE + LINE), []),                                            # two lines
    (_ended(stderr=LINE.rstrip("\n")), []),                                      # no line end
    (_ended(stderr="error: --tp 3\n"), []),                                      # not the tool's prefix
    (_ended(stderr=LINE.replace("3", "3\x1b[31m")), []),                         # a control character
    (_ended(stderr=LINE.replace("target", "\u202etarget")), []),                 # a bidi override
    (_ended(stdout="Traceback (most recent call last):\n"), []),                 # a traceback anywhere
    (_ended(), ["--rebuild-checkpoint"]),                                        # a fact missing
    (_ended(), ["--tpx"]),                                                       # not as a whole word
], ids=["code", "two lines", "no newline", "prefix", "control", "bidi", "traceback", "missing", "glued"])
def test_a_malformed_refusal_or_a_missing_fact_fails(ended, names):
    with pytest.raises(AssertionError):
        assert_refusal(ended, *names)


def test_quiet_asks_for_an_empty_stdout():
    with pytest.raises(AssertionError):
        assert_refusal(_ended(stdout="[control] run folder: runs/x\n"), quiet=True)


def test_names_are_whole_words_and_paths_may_be_shell_quoted():
    assert mentions("GPU 3 is busy", "3") and not mentions("GPU 31 is busy", "3")
    assert mentions("pass --tp 4", "--tp") and not mentions("pass --tpx", "--tp")
    assert mentions("`chmod go-w '/tmp/a b/x.toml'`", "/tmp/a b/x.toml")
    assert mentions("config file runs/x/config.json", "config.json")


def test_a_note_is_found_once_among_other_lines():
    text = "[control] started\ndsv4-agent: config file: none (defaults)\nnote: mtp.json is not JSON\n"
    assert message_naming(text, "config file", "none").startswith("dsv4-agent: ")
    assert message_naming(text, "mtp.json", prefix="note: ")
    with pytest.raises(AssertionError):
        message_naming(text, "mtp.json")  # a note, not the tool's prefix
    with pytest.raises(AssertionError):
        message_naming(text + text, "config file")  # said twice
