"""The refusals a person meets most, held to the checked-in snapshot ``tests/fixtures/messages.txt``
(``tests/make_messages.py`` renders it; regenerate with ``.venv/bin/python tests/make_messages.py``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.make_messages import CASES, SNAPSHOT, render
from tests.messages import assert_message


@pytest.mark.no_replay("hand-made run folders, refused")
def test_the_most_seen_refusals_read_as_the_snapshot_says(tmp_path: Path):
    rendered = render(tmp_path)
    assert rendered == SNAPSHOT.read_text(), (
        "a message changed: review the diff, then `.venv/bin/python tests/make_messages.py`\n" + rendered)


def test_every_case_of_the_snapshot_is_a_refusal_of_one_line():
    rows = [line.split(" | ", 2) for line in SNAPSHOT.read_text().splitlines()]
    assert [name for name, _code, _said in rows] == list(CASES)
    for name, code, said in rows:
        assert code in ("exit 1", "exit 2"), (name, code)
        assert_message(said)
