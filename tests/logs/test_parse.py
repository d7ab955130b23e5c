"""The record schema against real-world lines; tracebacks; UTF-8, ANSI, long lines."""

import pytest

from server_control.logs import DISPLAY_CAP, JSON_KEYS, KINDS, Parser, parse_bytes, parse_text
from server_control.logs.lines import LineSplitter
from tests.logs.samples import SAMPLES


@pytest.mark.parametrize("line,expected", SAMPLES, ids=[f"{i}:{s[:40]}" for i, (s, _) in enumerate(SAMPLES)])
def test_sample_line(line, expected):
    [rec] = parse_text(line + "\n")
    got = rec.to_json()
    assert list(got) == list(JSON_KEYS)
    assert got["line"] == 1
    assert got["kind"] in KINDS
    for key, value in expected.items():
        assert got[key] == value, f"{key}: {got[key]!r} != {value!r} in {line!r}"
    assert isinstance(got["text"], str)


def test_schema_types_on_all_samples():
    text = "\n".join(line for line, _ in SAMPLES) + "\n"
    records = parse_text(text)
    assert [r.line for r in records] == list(range(1, len(SAMPLES) + 1))
    ints = ("running_req", "queue_req", "num_tokens", "new_seq", "new_token", "cached_token", "threshold", "batch")
    floats = ("token_usage", "gen_throughput", "accept_len", "accept_rate", "input_throughput")
    for rec in records:
        js = rec.to_json()
        for key in ints:
            assert js[key] is None or type(js[key]) is int, (key, rec)
        for key in floats:
            assert js[key] is None or type(js[key]) is float, (key, rec)
        assert js["cuda_graph"] in (None, True, False)
        assert js["mode"] in (None, "speculative", "target_only")
        if js["kind"] not in ("decode", "prefill"):
            assert all(js[k] is None for k in ints[:6] + floats), rec
        if js["kind"] == "decode" and "nan" not in js["text"]:
            assert js["running_req"] is not None


def test_numeric_fields_are_also_attributes():
    rec = parse_text(SAMPLES[0][0])[0]
    assert (rec.running_req, rec.accept_len, rec.cuda_graph) == (8, 2.85, True)
    assert rec.threshold is None and rec.long is False


TRACEBACK = """[2026-11-29 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/sglang/srt/managers/scheduler.py", line 990, in event_loop_overlap
    batch = self.get_next_batch_to_run()
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
[2026-11-29 10:00:01] Received sigquit from a child process. It usually means the child failed.
"""


def test_traceback_grouped_into_one_record():
    records = parse_text(TRACEBACK)
    assert [(r.line, r.kind) for r in records] == [(1, "traceback"), (10, "error")]
    tb = records[0]
    assert tb.rank == "TP0" and tb.ts == "2026-11-29T10:00:00"
    assert tb.text.startswith("Scheduler hit an exception: Traceback")
    assert tb.text.count("\n") == 8
    assert tb.text.endswith("CUDA_LAUNCH_BLOCKING=1")


CHAINED = """Traceback (most recent call last):
  File "a.py", line 1, in f
    g()
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 3, in <module>
    f()
ValueError: bad

[2026-11-29 10:00:02] next line
"""


def test_chained_traceback_is_one_record_and_trailing_blank_is_not():
    records = parse_text(CHAINED)
    assert [(r.line, r.kind) for r in records] == [(1, "traceback"), (12, "other"), (13, "other")]
    assert records[0].raw.splitlines()[-1] == "ValueError: bad"
    assert records[2].text == "next line"


def test_truncated_traceback_ends_at_next_record():
    text = 'Traceback (most recent call last):\n  File "a.py", line 1\n[2026-11-29 10:00:00] after\n'
    records = parse_text(text)
    assert [(r.line, r.kind) for r in records] == [(1, "traceback"), (3, "other")]


def test_traceback_at_end_of_input_is_flushed():
    parser = Parser()
    nums, kinds, raws = parser.feed(["x", "Traceback (most recent call last):", '  File "a.py"', "E: e"])
    assert (nums, kinds) == ([1], ["other"]) and parser.pending
    nums, kinds, raws = parser.flush()
    assert (nums, kinds, raws[0].count("\n")) == ([2], ["traceback"], 2) and not parser.pending


@pytest.mark.parametrize("cut", range(0, 14))
def test_traceback_split_across_feeds_gives_same_records(cut):
    lines = TRACEBACK.rstrip("\n").split("\n") + ["tail line"]
    whole = Parser()
    expected = [whole.feed(lines), whole.flush()]
    parser = Parser()
    got = [parser.feed(lines[:cut]), parser.feed(lines[cut:]), parser.flush()]

    def flat(parts):
        return [list(zip(*p)) for p in parts if p[0]]

    assert sum(flat(got), []) == sum(flat(expected), [])


def test_invalid_utf8_is_replaced_and_ansi_stripped():
    data = (
        b"\x1b[32m[2026-11-29 10:00:00 TP0]\x1b[0m Decode batch, #running-req: 2, #token: 1, "
        b"token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, \xff\xfe\n"
        b"\x1b]0;title\x07caf\xc3\xa9 \x00bell\x07 \x1b(Bx\r\n"
        b"progress 10%\rprogress 100%\n"
    )
    records = parse_bytes(data)
    assert [r.kind for r in records] == ["decode", "other", "other"]
    assert records[0].rank == "TP0" and records[0].running_req == 2
    assert records[0].raw.endswith("\ufffd\ufffd")
    assert records[1].raw == "café bell x"
    assert records[2].raw == "progress 10%progress 100%"
    assert all("\x1b" not in r.raw for r in records)


def test_long_line_kept_whole_but_marked():
    long_line = "[2026-11-29 10:00:00] " + "y" * (DISPLAY_CAP * 3)
    records = parse_text(f"short\n{long_line}\n")
    assert [r.long for r in records] == [False, True]
    assert records[1].raw == long_line


def test_splitter_holds_partial_line_and_cuts_absurd_ones():
    splitter = LineSplitter(max_line_bytes=100)
    assert splitter.feed(b"abc") == ([], "")
    assert splitter.feed(b"def\nxy")[0] == ["abcdef"]
    assert splitter.partial == b"xy"
    lines, _ = splitter.feed(b"z" * 150)  # no newline and over the cap: cut at 100 bytes
    assert lines == ["xy" + "z" * 98] and splitter.cut_lines == 1
    assert splitter.feed(b"zzz\nnext\n")[0] == ["next"]  # the rest of the cut line is dropped
    assert splitter.flush() == ([], "")
