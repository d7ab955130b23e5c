"""The fast JSON lines (server_control/logs/json_lines.py) give the same JSON values, keys
in the same order, as the Record way (``Record.to_json`` and msgspec), line by line: each
odd line alone (a block of one), all of them in one batch (a line that does not fit sends
its block line by line), mixed into the benchmark's log; and `specconsole logs FILE
--parse --json` writes them (a real CLI process)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import msgspec

from benchmarks.logs_bench import generate
from server_control.logs import iter_file
from server_control.logs.json_lines import fast_lines, json_lines
from server_control.logs.parse import parse_bytes, parse_text
from server_control.logs.record import Record, _fast_stats, parse_stat_pairs

REPO = Path(__file__).resolve().parents[2]
ENC = msgspec.json.Encoder().encode
P = "[2026-11-29 10:00:05 TP0] "
DEC = (
    "Decode batch, #running-req: 7, #token: 900, token usage: 0.10, accept len: 2.80, accept rate: 0.45, "
    "cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 2"
)
PRE = "Prefill batch, #new-seq: 4, #new-token: 407, #cached-token: 1811, token usage: 0.05, #running-req: 3, #queue-req: 1, "
RANKS_60 = " ".join(f"TP{i}" for i in range(60))

# (line, the fast way must take it)
ODD: list[tuple[str, bool]] = [
    # SGLang 0.5.23's own stats shapes: every variant of rank / accept / graph, milliseconds
    (P + DEC, True),
    (P + DEC.replace("True", "False"), True),
    (
        "[2026-11-29 10:00:05.123 DP1 TP3] Decode batch, #running-req: 0, #token: 0, token usage: 0.00, "
        "cuda graph: False, gen throughput (token/s): 0.00, #queue-req: 0, ",
        True,
    ),
    ("[2026-11-29 10:00:05] " + DEC, True),
    (
        "[2026-11-29 10:00:05] Decode batch. #running-req: 1, #full token: 5, full token usage: 1.5, cpu graph: True, "
        "gen throughput (token/s): 10.0, #queue-req: 0",
        True,
    ),
    ("[2026-11-29 10:00:05 ATTN_TP0 EP1] " + DEC, True),
    (P + PRE, True),
    ("[2026-11-29 10:00:05.5] " + PRE.rstrip(", "), True),
    # stats lines that are not the known shape: the Record way
    (P + DEC.replace("#running-req: 7", "#running-req: 07"), False),  # leading zero: not a JSON number
    (P + PRE.replace("#new-seq: 4", "#new-seq: 04"), False),
    (P + DEC.replace("#running-req: 7", "#running-req: 1\u0663"), False),  # Arabic-Indic digit: int() reads it
    (P + DEC.replace("#token: 900", "#token: 12345678901234567890"), False),  # 20 digits
    (P + DEC + ', extra: "quoted\\"', False),
    (P + PRE + "input throughput (token/s): 1e9", False),
    ("wrapper: " + P + DEC, False),
    (f"[2026-11-29 10:00:05 {RANKS_60}] " + DEC, False),  # the prefix runs past the 240-column window
    ("[2026-11-29 10:00:05,123 TP0] " + DEC, False),
    # kinds without fields, SGLang's prefix: the fast way, escaped
    ('[2026-11-29 10:00:05] INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK', True),
    (P + 'WARNING: a "quoted" back\\slash \\" and a\ttab', True),
    (P + "ERROR: control \x01 \x1b[31m \r chars, DEL \x7f", True),
    (P + "plain ünïcode line é — 漢字 \ufffd (invalid UTF-8 read)", True),
    (P + "The server is fired up and ready to roll!", True),
    ("[10:00:05 TP0 EP0] no date, only the clock", True),
    ("[2026-11-29T10:00:05.123456789 DP3 TP3]no space after the bracket", True),
    ("[2026-11-29 10:00:05]", True),  # no message
    (P + "x" * 5000, True),  # a very long line
    (f"[2026-11-29 10:00:05 {RANKS_60}] too many ranks", False),
    ("[2026-11-29 10:00:05,123 TP0] a comma in the clock", False),
    ("[gpu_id=0] another release's prefix", False),
    ("INFO 11-29 10:00:00 [x.py:12] a vLLM-style prefix", False),
    ("/usr/lib/python3/torch/cuda/__init__.py:61: FutureWarning: no prefix at all", False),
    ("", False),
    ("plain line without any prefix \u00e9", False),
    # kinds with fields of their own, and tracebacks: the Record way
    ("[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)", False),
    ('[2026-11-29 10:00:08 TP0] Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom', False),
]


def slow(rec: Record) -> dict:
    return json.loads(ENC(rec.to_json()))


def check(recs: list[Record]) -> list[bool]:
    """Whether the fast way took each record; where it did, the same JSON as the Record way."""
    got = fast_lines([r.line for r in recs], [r.kind for r in recs], [r.raw for r in recs], lambda n, k, r: None)
    for rec, line in zip(recs, got):
        if line is not None:
            assert line.endswith("}\n") and line.count("\n") == 1, rec.raw
            fast, want = json.loads(line), slow(rec)
            assert list(fast) == list(want), f"keys in the contract's order: {rec.raw!r}"
            assert fast == want, rec.raw
    return [line is not None for line in got]


def odd_records() -> list[Record]:
    recs = parse_text("\n".join(line for line, _ in ODD) + "\n")
    assert len(recs) == len(ODD), "one record per odd line (the traceback grouped)"
    return recs


def test_each_odd_line_alone_agrees_or_goes_the_record_way() -> None:
    for rec, (_, want) in zip(odd_records(), ODD):
        assert check([rec]) == [want], rec.raw


def test_the_odd_lines_in_one_batch() -> None:
    recs = odd_records()
    taken = check(recs)
    # a stats line that does not fit sends its whole block line by line: the others still go fast
    assert taken == [want for _, want in ODD]
    out = b"".join(json_lines([([r.line for r in recs], [r.kind for r in recs], [r.raw for r in recs])], ENC))
    assert [json.loads(x) for x in out.decode().splitlines()] == [slow(r) for r in recs]


def test_a_raw_holding_a_newline_cannot_stand_in_for_another() -> None:
    """Columns from anywhere: "A\\nA" then a line of another shape match twice for two raws."""
    recs = [Record(1, "decode", P + DEC + "\n" + P + DEC), Record(3, "decode", P + "Decode batch, #running-req: x")]
    assert check(recs) == [False, False]
    recs = [Record(1, "http", P + "a\n" + P + "b"), Record(3, "http", "")]
    assert check(recs) == [False, False]


def test_the_benchmark_log_with_odd_lines_agrees_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    generate(path, 20_000)
    lines = path.read_text().splitlines()
    rnd = random.Random(3)
    for line, _ in ODD:
        lines.insert(rnd.randrange(len(lines)), line)
    path.write_text("\n".join(lines) + "\n")
    fast_taken = 0
    for nums, kinds, raws in iter_file(path):
        taken = check([Record(n, k, r) for n, k, r in zip(nums, kinds, raws)])
        fast_taken += sum(taken)
    assert fast_taken > 18_000
    out = b"".join(json_lines(iter_file(path), ENC)).decode().splitlines()
    want = [slow(Record(n, k, r)) for nums, kinds, raws in iter_file(path) for n, k, r in zip(nums, kinds, raws)]
    assert [json.loads(x) for x in out] == want


def test_the_cli_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "odd.log"
    data = ("\n".join(line for line, _ in ODD) + "\n").encode() + P.encode() + b"invalid UTF-8 \xff\xfe \xc3( end\n"
    path.write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    got = (
        subprocess.run(
            [sys.executable, "-m", "console", "logs", str(path), "--parse", "--json"],
            env=env,
            capture_output=True,
            timeout=60,
            check=True,
        )
        .stdout.decode()
        .splitlines()
    )
    assert [json.loads(x) for x in got] == [slow(r) for r in parse_bytes(data)]


def test_parse_stats_one_match_agrees_with_the_pairs(tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    generate(path, 5_000)
    text = path.read_text() + "\n".join(line for line, _ in ODD) + "\n"
    recs = [r for r in parse_text(text) if r.kind in ("decode", "prefill")]
    taken = 0
    for rec in recs:
        fast = _fast_stats(rec.text)
        if fast is not None:
            taken += 1
            assert fast == parse_stat_pairs(rec.text), rec.raw
    assert taken > 2_000
