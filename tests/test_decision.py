"""The shared per-step switch: rule, hysteresis, dwell, force, validation, wording."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server_control.protocol.decision import (
    SPECULATIVE,
    TARGET_ONLY,
    SpecSwitch,
    init_line,
    validate_threshold,
)
from server_control.protocol.runtime_settings import DWELL, FORCE, HYSTERESIS, THRESHOLD, apply


def run(sw, batches):
    return [(sw.decide(b), sw.mode) for b in batches]


def test_threshold_zero_never_disables():
    sw = SpecSwitch(threshold=0, min_dwell_steps=0)
    assert all(mode == SPECULATIVE and msg is None for msg, mode in run(sw, [1, 50, 500]))


def test_switch_above_threshold_and_back_at_low_mark():
    sw = SpecSwitch(threshold=5, hysteresis=1, min_dwell_steps=0)
    out = run(sw, [5, 6, 5, 4, 3])
    assert [m for _, m in out] == [SPECULATIVE, TARGET_ONLY, TARGET_ONLY, SPECULATIVE, SPECULATIVE]
    assert out[1][0] == "Dynamic speculation: switched to target-only (decode batch 6 > threshold 5)"
    assert out[3][0] == "Dynamic speculation: switched to speculative (decode batch 4 <= 4, threshold 5)"
    assert sw.switches == {SPECULATIVE: 1, TARGET_ONLY: 1}
    assert sw.steps == {SPECULATIVE: 3, TARGET_ONLY: 2}


def test_dwell_blocks_flapping():
    sw = SpecSwitch(threshold=5, hysteresis=0, min_dwell_steps=3)
    modes = [m for _, m in run(sw, [9, 9, 9, 9, 1, 1, 9, 1, 1, 1])]
    # 3 speculative steps of dwell first, then off; at least 3 off steps before it can
    # come back, and the 9 on step 7 keeps it off
    assert modes == [SPECULATIVE] * 3 + [TARGET_ONLY] * 4 + [SPECULATIVE] * 3
    assert sw.switches[TARGET_ONLY] == 1 and sw.switches[SPECULATIVE] == 1


def test_force_overrides_and_auto_returns():
    sw = SpecSwitch(threshold=5, min_dwell_steps=100)
    assert apply(sw, FORCE, "target-only")[0] == "Dynamic speculation: force mode set to target_only"
    assert sw.decide(1) == "Dynamic speculation: switched to target-only (forced)"
    apply(sw, FORCE, 0)  # over HTTP: the mode's index
    assert sw.decide(1) is None and sw.mode == TARGET_ONLY  # dwell still applies in auto


def test_idle_steps_count_nothing():
    sw = SpecSwitch(threshold=1, min_dwell_steps=0)
    assert sw.decide(0) is None
    assert sw.steps == {SPECULATIVE: 0, TARGET_ONLY: 0}


@pytest.mark.parametrize("bad", [-1, 1.5, "x", True, None, 10**6])
def test_bad_thresholds_refused_with_reason(bad):
    with pytest.raises(ValueError) as err:
        validate_threshold(bad)
    assert "speculative_disable_batch_threshold" in str(err.value)


def test_set_threshold_message_and_snapshot():
    sw = SpecSwitch(threshold=5)
    assert apply(sw, THRESHOLD, 8) == ("Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)", 8)
    assert apply(sw, HYSTERESIS, 2)[0] == "Dynamic speculation: hysteresis changed 1 -> 2 (resume_at<=6)"
    assert apply(sw, DWELL, 4)[0] == "Dynamic speculation: min_dwell_steps changed 10 -> 4"
    apply(sw, HYSTERESIS, 1)
    snap = sw.snapshot()
    assert snap["threshold"] == 8 and snap["low_mark"] == 7 and snap["mode"] == SPECULATIVE
    assert init_line(5, 1, 10) == "Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10"


@given(st.lists(st.integers(0, 64), max_size=200), st.integers(0, 16), st.integers(0, 4), st.integers(0, 5))
def test_two_ranks_fed_the_same_batches_agree(batches, n, h, d):
    a, b = SpecSwitch(n, h, d), SpecSwitch(n, h, d)
    for x in batches:
        assert a.decide(x) == b.decide(x)
        assert a.mode == b.mode
        if n == 0:
            assert a.mode == SPECULATIVE


@pytest.mark.parametrize(
    "text,reason",
    [("-3", "must be >= 0, got -3"), ("+7", None), (" 8 ", None), ("--3", "must be an integer"), ("3-", "must be an integer")],
)
def test_threshold_text_gets_the_real_reason(text, reason):
    if reason is None:
        assert validate_threshold(text) == int(text)
    else:
        with pytest.raises(ValueError, match=reason):
            validate_threshold(text)


@pytest.mark.parametrize("text", ["８", "１２", "٨", "८", " 8\u3000"])
def test_non_ascii_digits_are_refused_as_a_threshold(text):
    with pytest.raises(ValueError, match="must be an integer"):
        validate_threshold(text)


def test_the_cold_mark_applies_to_target_only_steps_above_it_in_a_target_only_stretch():
    sw = SpecSwitch(threshold=4, hysteresis=1, min_dwell_steps=0, cold_draft_above=6)
    seen = []
    for batch in (3, 5, 9, 7, 6, 5, 3):
        sw.decide(batch)
        seen.append(sw.draft_cold(batch, sw.mode))
    assert seen == [False, False, True, True, False, False, False]
    assert sw.cold_steps == 2 and sw.snapshot()["cold_steps"] == 2
    # exploration runs one target-only step amid speculative ones: it stays warm
    sw.decide(9 if sw.mode == "target_only" else 2)
    assert sw.mode == "speculative" and sw.draft_cold(9, "target_only") is False
    # a speculative step is never cold; the mark at 0 never makes one cold
    off = SpecSwitch(threshold=4, min_dwell_steps=0, force="target_only")
    off.decide(50)
    assert off.draft_cold(50, "target_only") is False and off.draft_cold(50, "speculative") is False
    assert off.cold_steps == 0


def test_a_bad_cold_mark_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="speculative_disable_cold_draft_above must be >= 0, got -2"):
        SpecSwitch(threshold=4, cold_draft_above=-2)
