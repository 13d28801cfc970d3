"""Exit codes come from one table (agent/exit_codes.py), one meaning each, and the README lists them all."""
from __future__ import annotations

import re
from enum import IntEnum, unique
from pathlib import Path

import pytest

from agent.exit_codes import RUN_STATUSES, ExitCode, exit_code_of

ROOT = Path(__file__).parent.parent


def test_each_run_status_ends_with_its_code():
    assert {status: int(exit_code_of(status)) for status in RUN_STATUSES} == {
        "finished": 0, "planned": 0, "failed": 1, "interrupted": 130, "budget_exhausted": 3}


def test_a_replay_cut_short_is_no_campaign_ending():
    assert ExitCode.CUT_SHORT not in {exit_code_of(status) for status in RUN_STATUSES}
    assert ExitCode.CUT_SHORT not in (ExitCode.DONE, ExitCode.FAILED, ExitCode.USAGE)


def test_a_second_name_for_a_code_is_refused():
    with pytest.raises(ValueError, match="duplicate values"):
        unique(IntEnum("Codes", {"FAILED": 1, "DIVERGED": 1}))


def test_the_readme_lists_every_code():
    text = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"exit codes: (.*?) \(`agent/exit_codes\.py`\)", text)
    assert listed, "README.md: the sentence listing the exit codes ends with (`agent/exit_codes.py`)"
    assert sorted(int(n) for n in re.findall(r"(?:^|, )(\d+) ", listed.group(1))) == sorted(ExitCode)
