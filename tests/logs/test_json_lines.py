"""The fast JSON lines (server_control/logs/json_lines.py) give the same JSON values, keys
in the same order, as the Record way (``Record.to_json`` and msgspec), line by line: each
odd line alone (a block of one), all of them in one batch (a line that does not fit sends
its block line by line), mixed into the benchmark's log, a log of mixed SGLang versions'
shapes, stats lines mutated at random; and `specconsole logs FILE
--parse --json` writes them (a real CLI process)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.logs_bench import generate
from benchmarks.mixed_log import generate_mixed
from server_control.logs import Record, iter_file, parse_bytes, parse_text
from server_control.logs.json_lines import fast_lines, json_lines
from server_control.logs.record import _fast_stats, parse_stat_pairs
from tests.support.odd_log_lines import DEC, ODD, P, odd_records

REPO = Path(__file__).resolve().parents[2]
ENC = msgspec.json.Encoder().encode


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


@pytest.mark.parametrize("way", ["", "python"])  # the C writer where built; the Python layer alone
def test_the_cli_writes_them(tmp_path: Path, way: str) -> None:
    """A file with every odd line and invalid UTF-8, by the CLI, each way: the Record way's values."""
    path = tmp_path / "odd.log"
    data = ("\n".join(line for line, _ in ODD) + "\n").encode() + P.encode() + b"invalid UTF-8 \xff\xfe \xc3( end\n"
    path.write_bytes(data)
    env = dict(os.environ, PYTHONPATH=str(REPO), SPECCONSOLE_JSON=way)
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


def test_the_mixed_versions_log_agrees_line_by_line_and_goes_fast(tmp_path: Path) -> None:
    """Stats lines of every release's and option's shape (benchmarks/mixed_log.py) are read key
    by key: the Record way's values, and nearly all of them without a Record."""
    path = tmp_path / "mixed.log"
    generate_mixed(path, 20_000)
    stats = stats_taken = 0
    for nums, kinds, raws in iter_file(path):
        recs = [Record(n, k, r) for n, k, r in zip(nums, kinds, raws)]
        for rec, took in zip(recs, check(recs)):
            if rec.kind in ("decode", "prefill"):
                stats += 1
                stats_taken += took
    assert stats > 14_000 and stats_taken == stats, "every mixed stats line goes the fast way"


MUTABLE = [line for line, _ in ODD if " batch" in line and "\n" not in line]
STATS_ALPHABET = '0123456789 ,.:-_[]#ATPXZaeknrstu()/"\\\t\x1f\x01é%'


@st.composite
def mutated_stats(draw: st.DrawFn) -> str:
    chars = list(draw(st.sampled_from(MUTABLE)))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        c = draw(st.sampled_from(STATS_ALPHABET))
        if op == "insert":
            chars.insert(i, c)
        elif i < len(chars):
            if op == "delete":
                del chars[i]
            else:
                chars[i] = c
    return "".join(chars)


@settings(max_examples=500, deadline=None)
@given(st.lists(mutated_stats(), min_size=1, max_size=4), st.sampled_from(["decode", "prefill"]))
def test_mutated_stats_lines_key_by_key_agree_with_the_record_way(raws: list[str], kind: str) -> None:
    """Digits, separators, keys, quotes and control characters inserted, deleted or replaced:
    where the fast way takes a line, its values are the Record way's."""
    check([Record(i + 1, kind, raw) for i, raw in enumerate(raws)])
