"""SGLang's own accept-length floors, read from the real upstream test files (../shared/corpus laid over
the 0.5.23 wheel), a measured accept length held against them, and a data-parallel server's snapshot
whose ranks disagree."""
from __future__ import annotations

import pytest

from tests.decision_fixtures import upstream_checkout
from tools.measure.accept_floors import check_accept, floors_for, read_floors
from tools.measure.accept_snapshots import Snapshot, point_accept_length


@pytest.fixture(scope="module")
def floors(tmp_path_factory, sglang_wheel_root):
    return read_floors(upstream_checkout(tmp_path_factory.mktemp("floors") / "sglang", sglang_wheel_root))


def test_floors_come_from_sglangs_tests_each_cited_with_the_drafter_and_step_count(floors):
    by_source = {f.source: f for f in floors}
    amd = next(f for s, f in by_source.items() if s.startswith("test/registered/amd/accuracy/mi30x/"
                                                                "test_deepseek_v32_mtp_eval_amd.py:"))
    assert (amd.value, amd.algorithm, amd.steps) == (2.7, "EAGLE", 3)  # AVG_SPEC_ACCEPT_LENGTH_THRESHOLD, resolved
    dp = [f for s, f in by_source.items() if s.startswith("test/registered/spec/eagle/test_eagle_dp_attention.py:")]
    assert sorted(f.value for f in dp) == [2.0, 2.5] and {(f.algorithm, f.steps) for f in dp} == {("EAGLE3", 6)}
    dflash = [f for f in floors if f.source.startswith("test/registered/spec/dflash/test_dflash.py:")]
    assert {f.value for f in dflash} == {2.8, 2.0} and all(f.what == "gsm8k_accept_length_thres" for f in dflash)
    dsa = [f for f in floors if f.source.startswith("python/sglang/test/server_fixtures/dsa_mtp_fixture.py:")]
    assert {(f.value, f.algorithm, f.steps) for f in dsa} == {(3.7, "EAGLE", 5), (4.0, "EAGLE", 5)}  # class attributes
    assert all(":" in f.source and f.source.rsplit(":", 1)[1].isdigit() for f in floors)
    assert {f.value for f in floors_for(floors, "NEXTN", 3)} >= {2.7, 3.3}  # NEXTN is SGLang's alias of EAGLE
    assert floors_for(floors, "EAGLE", 1) == []


def test_a_measured_accept_length_against_the_floor(floors):
    below = check_accept("mtp", "EAGLE", 3, (8, 2.1), floors)
    assert below.status == "below-floor" and below.floor.value == 2.7  # the most lenient of the EAGLE 3-step floors
    assert below.text.startswith("mtp: accept length 2.10 with 3 draft steps (at concurrency 8) is below 2.7, the floor")
    assert "test_deepseek_v32_mtp_eval_amd.py:" in below.text
    assert check_accept("mtp", "EAGLE", 3, (1, 2.9), floors).status == "ok"
    collapsed = check_accept("mtp-3-1-4", "EAGLE", 3, (16, 1.02), floors)
    assert collapsed.status == "collapsed"
    assert collapsed.text == ("mtp-3-1-4: accept length 1.02 with 3 draft steps (at concurrency 16): the drafter is "
                              "probably not loaded as intended")
    none = check_accept("mtp-1-1-2", "EAGLE", 1, (1, 1.7), floors)
    assert none.status == "no-floor" and "SGLang's tests state no floor for EAGLE with 1 draft steps" in none.text
    assert check_accept("mtp", "EAGLE", 3, None, floors).status == "not-measured"
    assert read_floors(None) == [] and check_accept("x", "EAGLE", 3, (1, 1.5), []).status == "no-floor"


def test_without_counters_a_data_parallel_servers_ranks_that_disagree_are_not_one_points_figure():
    before = Snapshot(tag="mtp-c1", phase="before", avg_spec_accept_length=0.0, rank_accept_lengths=[0.0, 0.0])
    split = Snapshot(tag="mtp-c1", phase="after", rank_accept_lengths=[1.0, 3.0])
    point = point_accept_length(before, split)
    assert point.value is None and point.method == "not-isolated" and "2 data-parallel ranks" in point.note
    same = Snapshot(tag="mtp-c1", phase="after", avg_spec_accept_length=2.0, rank_accept_lengths=[2.0, 2.0])
    assert point_accept_length(before, same).value == 2.0
