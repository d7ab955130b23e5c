"""The per-mode, per-batch-bucket cost counters (server_control.protocol.cost_curves), pure."""

import pytest

from server_control.protocol import cost_curves as cc


def test_buckets_are_exact_to_the_cap_then_powers_of_two():
    assert [cc.bucket_bounds(cc.bucket_index(b)) for b in (1, 2, 31, 32)] == [(1, 1), (2, 2), (31, 31), (32, 32)]
    assert cc.bucket_bounds(cc.bucket_index(33)) == (33, 64)
    assert cc.bucket_bounds(cc.bucket_index(64)) == (33, 64)
    assert cc.bucket_bounds(cc.bucket_index(65)) == (65, 128)
    assert cc.bucket_bounds(cc.bucket_index(4096)) == (2049, 4096)
    assert cc.bucket_bounds(cc.bucket_index(10**6)) == (4097, 0)
    for cap in (1, 5, 20, 32, 100):
        n = cc.bucket_count(cap)
        seen = set()
        for b in list(range(1, 5000)) + [99999]:
            i = cc.bucket_index(b, cap)
            lo, hi = cc.bucket_bounds(i, cap)
            assert 0 <= i < n and lo <= b and (hi == 0 or b <= hi), (cap, b)
            seen.add(i)
        assert seen == set(range(n))  # every slot is reachable, none is spare


def test_step_time_goes_to_the_previous_step_and_tokens_to_their_own_batch():
    c = cc.CostCounters()
    c.step("speculative", 3, 10.0)
    c.commit("speculative", 3, 8)
    c.step("speculative", 3, 10.030)  # the first step took 30 ms
    c.commit("speculative", 3, 9)
    c.step("target_only", 40, 10.050)  # the second took 20 ms, still batch 3
    c.commit("target_only", 40, 40)
    c.step("target_only", 40, 10.065)
    curves = cc.parse(c.snapshot())
    (spec,) = curves.mode("speculative")
    assert (spec.lo, spec.hi, spec.steps, spec.verified, spec.tokens) == (3, 3, 2, 2, 17)
    assert spec.seconds == pytest.approx(0.050)
    assert spec.seconds_sq == pytest.approx(0.03**2 + 0.02**2)
    assert spec.step_s == pytest.approx(0.025)
    assert spec.tok_s == pytest.approx(8.5 / 0.025)
    (tgt,) = curves.mode("target_only")
    assert (tgt.lo, tgt.hi, tgt.steps, tgt.batch_sum, tgt.tokens) == (33, 64, 1, 40, 40)
    assert tgt.mean_batch == 40


def test_an_idle_gap_is_dropped_not_counted_as_a_slow_step():
    c = cc.CostCounters(max_gap_s=1.0)
    c.step("speculative", 2, 0.0)
    c.step("speculative", 2, 5.0)  # 5 s later: the server was idle
    c.step("speculative", 2, 5.02)
    (b,) = cc.parse(c.snapshot()).mode("speculative")
    assert b.steps == 1 and b.seconds == pytest.approx(0.02)
    assert c.snapshot()["dropped"] == 1
    c.idle()
    c.step("speculative", 2, 5.5)  # after idle(): no step is timed across the gap
    assert cc.parse(c.snapshot()).mode("speculative")[0].steps == 1


def test_memory_is_fixed_whatever_the_batches():
    c = cc.CostCounters()
    sizes = [len(v) for v in c._timed.values()] + [len(v) for v in c._done.values()]
    for i, b in enumerate(range(1, 20000, 7)):
        c.step("target_only", b, i * 0.01)
        c.commit("target_only", b, b)
    assert [len(v) for v in c._timed.values()] + [len(v) for v in c._done.values()] == sizes
    assert sizes == [5 * cc.bucket_count()] * 2 + [3 * cc.bucket_count()] * 2
    assert len(c.snapshot()["modes"]["target_only"]) <= cc.bucket_count()


def test_window_is_what_was_counted_since():
    c = cc.CostCounters()
    for i in range(5):
        c.step("speculative", 4, i * 0.03)
        c.commit("speculative", 4, 10)
    before = cc.parse(c.snapshot())
    for i in range(5, 9):
        c.step("speculative", 4, i * 0.03)
        c.commit("speculative", 4, 12)
    (w,) = cc.parse(c.snapshot()).minus(before).mode("speculative")
    assert w.verified == 4 and w.tokens == 48 and w.steps == 4
    assert w.seconds == pytest.approx(0.12)


def test_context_is_published_only_when_measured():
    c = cc.CostCounters()
    c.step("speculative", 2, 0.0)
    c.step("speculative", 2, 0.01)
    assert cc.parse(c.snapshot()).mode("speculative")[0].mean_context is None
    c.step("speculative", 2, 0.02, context=800.0)
    c.step("speculative", 2, 0.03, context=600.0)
    assert cc.parse(c.snapshot()).buckets[0].context_sum == 800.0


@pytest.mark.parametrize(
    "bad, where",
    [
        ([], "must be an object"),
        ({"cap": 0, "modes": {}}, "cap"),
        ({"cap": 32, "modes": {"turbo": []}}, "turbo"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2]]}}, r"modes.speculative\[0\] must be a list of 10"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2, -0.1, 0, 2, 1, 3, 9, None]]}}, "seconds"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2, "x", 0, 2, 1, 3, 9, None]]}}, "seconds"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, True, 0.1, 0, 2, 1, 3, 9, None]]}}, "steps"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2, float("nan"), 0, 2, 1, 3, 9, None]]}}, "seconds"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2, 0.1, float("inf"), 2, 1, 3, 9, None]]}}, "seconds_sq"),
        ({"cap": 32, "modes": {"speculative": [[1, 1, 2, 0.1, 0, None, 1, 3, 9, None]]}}, "batch_sum"),
        ({"cap": 32, "modes": {"speculative": [(1, 1, 2, 0.1, 0, 2, 1, 3, 9, None)]}}, "must be a list of 10"),
    ],
)
def test_bad_entries_are_refused_naming_the_field(bad, where):
    with pytest.raises(cc.CurvesError, match=where):
        cc.parse(bad)


def test_numbers_of_other_numeric_types_are_read():
    """parse checks plain JSON rows on a fast path; an int or float subclass (a value built
    in-process) takes the full check and is read, not refused."""

    class Seconds(float):
        pass

    row = [1, 1, 2, Seconds(0.1), 0.01, 2, 1, 3, 9, None]
    assert cc.parse({"cap": 32, "modes": {"speculative": [row]}}).buckets[0].seconds == 0.1
