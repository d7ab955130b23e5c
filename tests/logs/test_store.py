"""LogStore: bounds, counters, since/tail/get, filter and search."""

import pytest

from server_control.logs import DISPLAY_CAP, LogStore, parse_text
from server_control.logs.store import record_matcher

LOG = """[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 8, #token: 1, token usage: 0.01, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0,
[2026-11-29 10:00:00 TP1] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)
[2026-11-29 10:00:01 DP1 TP1] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,
INFO:     127.0.0.1:45678 - "POST /generate HTTP/1.1" 200 OK
[2026-11-29 10:00:02 TP0] Dynamic speculation: switched to speculative (decode batch 3 <= 4, threshold 5)
[2026-11-29 10:00:03] The server is fired up and ready to roll!
"""


def make_store(capacity=100, text=LOG):
    store = LogStore(capacity)
    store.extend(parse_text(text))
    return store


def test_seq_and_counters_without_drops():
    store = make_store()
    assert (store.total, store.dropped, store.truncated, len(store)) == (6, 0, 0, 6)
    assert [r.seq for r in store.records()] == [1, 2, 3, 4, 5, 6]
    assert store.counters() == {"total": 6, "dropped": 0, "truncated": 0}
    assert store.get(2).kind == "spec_switch" and store.get(7) is None and store.get(0) is None


def test_bounded_store_drops_oldest_and_counts():
    store = LogStore(capacity=4)
    lines = [f"line {i}" for i in range(1, 11)]
    for start in range(0, 10, 3):  # batches of 3, 3, 3, 1
        chunk = lines[start : start + 3]
        store.extend_columns(list(range(start + 1, start + 1 + len(chunk))), ["other"] * len(chunk), chunk)
    assert (store.total, store.dropped, len(store)) == (10, 6, 4)
    assert [r.raw for r in store.records()] == ["line 7", "line 8", "line 9", "line 10"]
    assert [r.seq for r in store.records()] == [7, 8, 9, 10]
    assert store.first_seq == 7 and store.last_seq == 10
    assert store.get(6) is None and store.get(7).raw == "line 7"


def test_batch_larger_than_capacity():
    store = LogStore(capacity=3)
    store.extend_columns([1, 2, 3, 4, 5], ["other"] * 5, list("abcde"))
    assert [r.raw for r in store.records()] == ["c", "d", "e"] and store.dropped == 2


def test_default_capacity_is_100k():
    assert LogStore().capacity == 100_000
    with pytest.raises(ValueError, match="capacity"):
        LogStore(0)


def test_truncated_counter_counts_long_records():
    store = make_store(text="short\n" + "x" * (DISPLAY_CAP + 1) + "\n" + "y" * DISPLAY_CAP + "\n")
    assert store.truncated == 1
    assert [r.long for r in store.records()] == [False, True, False]
    assert len(store.records()[1].raw) == DISPLAY_CAP + 1  # kept whole


def test_since_and_tail():
    store = make_store()
    assert [r.seq for r in store.since(4)] == [5, 6]
    assert store.since(6) == [] and len(store.since(0)) == 6
    assert [r.seq for r in store.since(0, limit=2)] == [1, 2]
    assert [r.seq for r in store.tail(2)] == [5, 6] and store.tail(0) == []
    small = LogStore(capacity=2)
    small.extend(parse_text(LOG))
    assert [r.seq for r in small.since(1)] == [5, 6]  # only what is still in memory


def test_tail_of_kind_is_the_tail_filtered_by_kind():
    """The poller's look for decode lines (``decode_tail``) reads only the kind column of the
    others: the same records, seqs and text as filtering the tail, after drops too."""
    store = LogStore(capacity=10)
    store.extend(parse_text(LOG * 3))  # 18 records, the oldest 8 dropped
    for n in (0, 1, 2, 5, 7, 10, 400):
        for kind in ("decode", "spec_switch", "http"):
            want = [(r.seq, r.raw) for r in store.tail(n) if r.kind == kind]
            assert [(r.seq, r.raw) for r in store.tail_of_kind(kind, n)] == want, (n, kind)
    assert [r.seq for r in store.decode_tail(400)] == [13] and store.decode_tail(400)[0].running_req == 8


def test_decode_tail_gives_the_records_it_gave_before_again_parsed_once():
    """Every poll asks for the decode records: the ones it had already are the same objects
    (their fields parsed once), the new ones are added, and the list equals the tail's."""
    store = LogStore(capacity=10)
    store.extend(parse_text(LOG))
    before = store.decode_tail(400)
    store.extend(parse_text(LOG))
    after = store.decode_tail(400)
    assert [r.seq for r in after] == [7] and after[0] is not before[0]  # seq 1 was dropped
    store.extend(parse_text(LOG.splitlines()[0] + "\n"))
    again = store.decode_tail(400)
    assert [r.seq for r in again] == [7, 13] and again[0] is after[0]
    assert [(r.seq, r.raw) for r in again] == [(r.seq, r.raw) for r in store.tail(400) if r.kind == "decode"]


def test_filter_by_regex_invert_kind_rank():
    store = make_store()
    assert [r.seq for r in store.filter("switched")] == [2, 5]
    assert [r.seq for r in store.filter("switched", invert=True)] == [1, 3, 4, 6]
    assert [r.seq for r in store.filter(kinds=["decode", "prefill"])] == [1, 3]
    assert [r.seq for r in store.filter(kinds="spec_switch,ready")] == [2, 5, 6]
    assert [r.seq for r in store.filter(rank="TP1")] == [2, 3]
    assert [r.seq for r in store.filter(rank="DP1 TP1")] == [3]
    assert [r.seq for r in store.filter("speculative", kinds=["spec_switch"], rank="TP0")] == [5]
    assert len(store.filter()) == 6


def test_bad_regex_and_unknown_kind_name_the_problem():
    store = make_store()
    with pytest.raises(ValueError, match=r"invalid regular expression '\(unclosed'"):
        store.filter("(unclosed")
    with pytest.raises(ValueError, match=r"invalid regular expression '\['"):
        store.search("[", 0)
    with pytest.raises(ValueError, match="unknown record kind 'decoded'"):
        store.filter(kinds=["decoded"])


def test_search_forward_and_backward():
    store = make_store()
    assert store.search("Dynamic", 0).seq == 2
    assert store.search("Dynamic", 2).seq == 5
    assert store.search("Dynamic", 5) is None
    assert store.search("Dynamic", 6, backwards=True).seq == 5
    assert store.search("Dynamic", 5, backwards=True).seq == 2
    assert store.search("Dynamic", 2, backwards=True) is None
    assert store.search("Dynamic", 100, backwards=True).seq == 5
    assert store.search("nothing-like-this", 0) is None


def test_search_after_drops_uses_seq():
    store = LogStore(capacity=3)
    store.extend(parse_text(LOG))  # seqs 4, 5, 6 remain
    assert store.search("Dynamic", 0).seq == 5
    assert store.search("INFO", 6, backwards=True).seq == 4
    assert store.search("Decode", 0) is None


def test_record_matcher_same_semantics_as_filter():
    store = make_store()
    match = record_matcher("switched", invert=True, kinds=None, rank="TP0")
    assert [r.seq for r in store.records() if match(r)] == [1]
    with pytest.raises(ValueError):
        record_matcher("(")
