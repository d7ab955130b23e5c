"""benchmarks/advise_rig.py's comparison: the advisor's crossover against mode_cost's (no server)."""

import pytest

from benchmarks.advise_rig import agreement
from benchmarks.triangle_traffic import triangle

LEVELS = [2, 4, 6, 8, 10]


@pytest.mark.parametrize("advised", [5, 6, 7, 4])
def test_a_crossover_within_the_measured_bracket_or_one_bucket_beside_it_agrees(advised):
    # mode_cost: speculation won at 4, target-only at 6: the crossover lies in batches 5-6
    got = agreement(LEVELS, 6, advised, advised - 1)
    assert got.agree, got.reason
    assert got.bracket == (5, 6)
    assert "within one bucket" in got.reason


@pytest.mark.parametrize("advised", [3, 8, 1, None])
def test_a_crossover_two_buckets_away_or_none_disagrees(advised):
    got = agreement(LEVELS, 6, advised, 0 if advised is None else advised - 1)
    assert not got.agree, got.reason
    assert "not within one bucket" in got.reason


def test_target_only_winning_at_the_lowest_level_brackets_from_batch_one():
    assert agreement(LEVELS, 2, 1, 1).bracket == (1, 2)
    assert agreement(LEVELS, 2, 3, 2).agree
    assert not agreement(LEVELS, 2, 4, 3).agree


@pytest.mark.parametrize("advised", [None, 10, 11, 40])
def test_no_crossover_in_mode_cost_agrees_with_an_advisor_that_finds_none_within_the_levels(advised):
    got = agreement(LEVELS, None, advised, 0 if advised is None else advised - 1)
    assert got.agree, got.reason
    assert "N is not limiting" in got.reason


@pytest.mark.parametrize("advised", [9, 7, 1])
def test_no_crossover_in_mode_cost_disagrees_with_an_advisor_that_puts_one_inside_the_levels(advised):
    got = agreement(LEVELS, None, advised, advised - 1)
    assert not got.agree, got.reason
    assert "target-only would win below 10" in got.reason


def test_an_advisor_without_enough_data_never_agrees():
    assert not agreement(LEVELS, None, None, None).agree
    assert not agreement(LEVELS, 6, 6, None).agree


def test_above_32_a_bucket_is_a_power_of_two_range():
    # 33-64 is one curve bucket, 65-128 the next, 129-256 two away
    assert agreement([16, 32, 64], 64, 100, 99).agree
    assert agreement([16, 32, 64], 64, 32, 31).agree  # batch 32's bucket is the one below 33-64
    assert not agreement([16, 32, 64], 64, 31, 30).agree
    assert not agreement([16, 32, 64], 64, 200, 199).agree


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="not one of the levels"):
        agreement(LEVELS, 5, 5, 4)
    with pytest.raises(ValueError, match="no levels"):
        agreement([], None, None, 0)


def test_the_phase_one_clients_walk_every_count_up_and_down():
    assert triangle(2, 5) == [2, 3, 4, 5, 4, 3]
    assert triangle(3, 3) == [3]
    with pytest.raises(ValueError):
        triangle(5, 2)
