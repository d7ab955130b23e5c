"""Hypothesis: no bytes make the parser raise; line numbers are monotone; chunking never
changes the result; every record serialises to exactly the contract keys."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server_control.logs import JSON_KEYS, KINDS, LogStore, Parser, parse_bytes
from server_control.logs.lines import LineSplitter
from server_control.logs.parse import records_from_columns
from tests.logs.samples import SAMPLES

# Pieces that steer the fuzzer towards the interesting paths.
FRAGMENTS = [s.encode() for s, _ in SAMPLES[:12]] + [
    b"Traceback (most recent call last):",
    b'  File "x.py", line 1',
    b"ValueError: x",
    b"",
    b"During handling of the above exception, another exception occurred:",
    b"\x1b[31m",
    b"\x1b]0;t\x07",
    b"\xff\xfe",
    b"\xc3",
    b"\r",
    b"[2026-11-29 10:00:00 TP0] ",
    b"Decode batch, #running-req: ",
    b"Dynamic speculation: switched to target-only (",
    b"Dynamic speculation disable enabled: threshold=",
    b"#running-req: 99999999999999999999, ",
]
chunks = st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(FRAGMENTS)), max_size=40)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(records, n_lines):
    last = 0
    for rec in records:
        assert rec.line > last, "line numbers must increase"
        last = rec.line
        assert 1 <= rec.line <= max(n_lines, 1)
        js = rec.to_json()
        assert tuple(js) == JSON_KEYS and js["kind"] in KINDS
        json.dumps(js)  # serialisable
        assert "\x1b" not in rec.raw


@SETTINGS
@given(chunks)
def test_any_bytes_parse_without_error(parts):
    data = b"\n".join(parts)
    records = parse_bytes(data)
    check(records, data.count(b"\n") + 1)
    # every line is accounted for: single-line records + the lines inside tracebacks
    covered = sum(r.raw.count("\n") + 1 for r in records)
    assert covered == (data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1))


@SETTINGS
@given(chunks, st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=20))
def test_chunking_does_not_change_records(parts, sizes):
    data = b"\n".join(parts) + b"\n"
    whole = [(r.line, r.kind, r.raw) for r in parse_bytes(data)]
    splitter, parser, got, pos, i = LineSplitter(), Parser(), [], 0, 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        i += 1
        lines, text = splitter.feed(data[pos : pos + size])
        pos += size
        if lines:
            got += records_from_columns(*parser.feed(lines, text))
    lines, text = splitter.flush()
    if lines:
        got += records_from_columns(*parser.feed(lines, text))
    got += records_from_columns(*parser.flush())
    assert [(r.line, r.kind, r.raw) for r in got] == whole


@SETTINGS
@given(chunks, st.integers(min_value=1, max_value=8))
def test_store_invariants_hold(parts, capacity):
    store = LogStore(capacity)
    records = parse_bytes(b"\n".join(parts))
    store.extend(records)
    assert store.total == len(records)
    assert len(store) == min(capacity, len(records))
    assert store.dropped == store.total - len(store)
    assert [r.seq for r in store.records()] == list(range(store.first_seq, store.last_seq + 1))
    assert store.filter(".") + store.filter(".", invert=True) != [] or len(store) == 0


@SETTINGS
@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(min_value=1, max_value=16))
def test_splitter_with_tiny_line_cap_never_raises(parts, cap):
    splitter = LineSplitter(max_line_bytes=cap)
    out = []
    for part in parts:
        out += splitter.feed(part)[0]
    out += splitter.flush()[0]
    # a cut line is at most cap bytes; whole lines up to cap + one chunk (the partial grew by one feed)
    assert all(len(line.encode("utf-8", "surrogatepass")) <= 3 * (cap + 40) for line in out)
    assert splitter.cut_lines >= 0
