"""The fast JSON lines (server_control/logs/json_lines.py) give the same JSON values, keys
in the same order, as the Record way (``Record.to_json`` and msgspec), line by line; and
`specconsole logs FILE --parse --json` writes them (a real CLI process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec

from benchmarks.logs_bench import generate
from server_control.logs import iter_file
from server_control.logs.json_lines import fast_json, json_lines
from server_control.logs.parse import parse_text
from server_control.logs.record import Record, _fast_stats, parse_stat_pairs

REPO = Path(__file__).resolve().parents[2]
ENC = msgspec.json.Encoder().encode

ODD = [
    # SGLang 0.5.23's own shapes, with and without speculation, rank tags, milliseconds
    "[2026-11-29 10:00:05 TP0] Decode batch, #running-req: 7, #token: 900, token usage: 0.10, accept len: 2.80, "
    "accept rate: 0.45, cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 2",
    "[2026-11-29 10:00:05.123 DP1 TP3] Decode batch, #running-req: 0, #token: 0, token usage: 0.00, "
    "cuda graph: False, gen throughput (token/s): 0.00, #queue-req: 0, ",
    "[2026-11-29 10:00:05] Decode batch. #running-req: 1, #full token: 5, full token usage: 1.5, cpu graph: True, "
    "gen throughput (token/s): 10.0, #queue-req: 0",
    "[2026-11-29 10:00:05 TP0] Prefill batch, #new-seq: 4, #new-token: 407, #cached-token: 1811, "
    "token usage: 0.05, #running-req: 3, #queue-req: 1, ",
    # not the known shape: the Record way
    "[2026-11-29 10:00:05 TP0] Decode batch, #running-req: 07, #token: 900, token usage: 0.12, cuda graph: True, "
    "gen throughput (token/s): 512.30, #queue-req: 2",
    "[2026-11-29 10:00:05 TP0] Decode batch, #running-req: 7, #token: 900, token usage: 0.12, cuda graph: True, "
    'gen throughput (token/s): 512.30, #queue-req: 2, extra: "quoted\\"',
    "[2026-11-29 10:00:05 TP0] Prefill batch(mixed), #new-seq: 4, #new-token: 407, #cached-token: 1811, "
    "token usage: 0.05, #running-req: 3, #queue-req: 1, input throughput (token/s): 1e9",
    "wrapper: [2026-11-29 10:00:05 TP0] Decode batch, #running-req: 7, #token: 900, token usage: 0.12, "
    "cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 2",
    "[2026-11-29 10:00:06 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)",
    '[2026-11-29 10:00:08 TP0] Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom',
    "plain ünïcode line \u00e9",
]


def slow(rec: Record) -> dict:
    return json.loads(ENC(rec.to_json()))


def same(rec: Record) -> bool | None:
    """None when the fast path does not take the record; else whether it agrees."""
    got = fast_json(rec.line, rec.kind, rec.raw)
    if got is None:
        return None
    fast, want = json.loads(got), slow(rec)
    assert list(fast) == list(want), "keys in the contract's order"
    return fast == want


def test_odd_lines_agree_or_go_the_record_way() -> None:
    recs = parse_text("\n".join(ODD) + "\n")
    taken = [same(r) for r in recs]
    assert taken[:4] == [True] * 4, "SGLang's own stats lines take the fast path and agree"
    assert set(taken[4:]) == {None}, "every other shape goes the Record way"


def test_the_benchmark_log_agrees_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    generate(path, 20_000)
    fast_taken = 0
    for nums, kinds, raws in iter_file(path):
        for n, k, r in zip(nums, kinds, raws):
            ok = same(Record(n, k, r))
            assert ok in (None, True), r
            fast_taken += ok is True
    assert fast_taken > 10_000
    out = b"".join(json_lines(iter_file(path), ENC)).decode().splitlines()
    want = [slow(Record(n, k, r)) for nums, kinds, raws in iter_file(path) for n, k, r in zip(nums, kinds, raws)]
    assert [json.loads(x) for x in out] == want


def test_the_cli_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "odd.log"
    path.write_text("\n".join(ODD) + "\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    got = subprocess.run(
        [sys.executable, "-m", "console", "logs", str(path), "--parse", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert [json.loads(x) for x in got] == [slow(r) for r in parse_text(path.read_text())]


def test_parse_stats_one_match_agrees_with_the_pairs(tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    generate(path, 5_000)
    recs = [r for r in parse_text(path.read_text() + "\n".join(ODD) + "\n") if r.kind in ("decode", "prefill")]
    taken = 0
    for rec in recs:
        fast = _fast_stats(rec.text)
        if fast is not None:
            taken += 1
            assert fast == parse_stat_pairs(rec.text), rec.raw
    assert taken > 2_000
