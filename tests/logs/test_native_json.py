"""The C writer of `logs --parse --json` (server_control/logs/native_json.c) writes the same
bytes as the Python fast groups (server_control/logs/json_lines.py), and takes a line
exactly where they take it (non-ASCII lines it leaves to them): on the odd lines, at the
shapes' length limits, on the benchmark's log, and on lines mutated at random. The lines it
leaves are written the Python way and put back in place."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.logs_bench import generate
from benchmarks.mixed_log import generate_mixed
from server_control.logs import Record, iter_file
from server_control.logs.json_lines import NATIVE, Native, fast_bodies, json_lines
from server_control.logs.record import STAT_KEYS
from tests.support.odd_log_lines import DEC, ODD, PRE, P, odd_records

ENC = msgspec.json.Encoder().encode
KINDS = ("decode", "prefill", "http", "other", "warning", "error", "ready", "spec_switch", "traceback")


def native() -> Native:
    if NATIVE is None:
        if os.environ.get("SPECCONSOLE_JSON") == "python":
            pytest.skip("SPECCONSOLE_JSON=python asks for the Python way")
        pytest.fail("the C writer was not built: `pip install -e .` builds it (a C compiler and Python headers)")
    return NATIVE


def both(nums: list[int], kinds: list[str], raws: list[str]) -> tuple[bytes, bytes]:
    cols = [(nums, kinds, raws)]
    return b"".join(json_lines(cols, ENC, native())), b"".join(json_lines(cols, ENC, None))


def assert_same_takes(kinds: list[str], raws: list[str]) -> None:
    """The C writer takes an ASCII line without "\\n" exactly when the Python fast way does."""
    _, left, _ = native()(list(range(1, len(raws) + 1)), kinds, raws)
    python_took = [b != "\x00" for b in fast_bodies(kinds, raws)]
    for i, (raw, took) in enumerate(zip(raws, python_took)):
        if raw.isascii():
            assert (i not in left) == took, (kinds[i], raw)
        else:
            assert i in left, raw


def test_the_install_built_it() -> None:
    data, left, at = native()([7], ["decode"], [P + DEC])
    assert data.startswith(b'{"line":7,"kind":"decode","ts":"2026-11-29T10:00:05","rank":"TP0"') and not left


def test_the_odd_lines_byte_for_byte() -> None:
    recs = odd_records()
    nums, kinds, raws = [r.line for r in recs], [r.kind for r in recs], [r.raw for r in recs]
    fast, python = both(nums, kinds, raws)
    assert fast == python
    assert_same_takes(kinds, raws)
    for n, k, r in zip(nums, kinds, raws):
        assert both([n], [k], [r])[0] == both([n], [k], [r])[1], r
    taken = [i for i in range(len(raws)) if i not in native()(nums, kinds, raws)[1]]
    assert len(taken) == sum(want and raw.isascii() for (raw, want) in ODD)


LIMITS = [
    # (line, taken)
    (f"[2026-11-29 10:00:05 {' '.join(f'TP{i}' for i in range(8))}] " + DEC, True),  # 8 ranks
    (f"[2026-11-29 10:00:05 {' '.join(f'TP{i}' for i in range(9))}] " + DEC, False),  # 9
    ("[2026-11-29 10:00:05 ABCDEF_TP123456] " + DEC, True),
    ("[2026-11-29 10:00:05 ABCDEFG_TP1] " + DEC, False),
    ("[2026-11-29 10:00:05 TP1234567] " + DEC, False),
    ("[2026-11-29 10:00:05 T1] " + DEC, False),
    ("[2026-11-29 10:00:05 TPXX1] " + DEC, False),
    ("[2026-11-29 10:00:05.123456789 TP0] " + DEC, True),
    ("[2026-11-29 10:00:05.1234567890 TP0] " + DEC, False),
    ("[2026-11-29 10:00:05. TP0] " + DEC, False),
    (P + DEC.replace("#token: 900", "#token: " + "9" * 18), True),
    (P + DEC.replace("#token: 900", "#token: " + "9" * 19), False),
    (P + DEC.replace("token usage: 0.10", "token usage: " + "1" * 18 + ".5"), True),
    (P + DEC.replace("token usage: 0.10", "token usage: " + "1" * 19 + ".5"), False),
    (P + DEC.replace("token usage: 0.10", "token usage: 0."), False),
    (P + DEC.replace("token usage: 0.10", "token usage: 0"), False),
    # key by key: a trailing ",", spaces, a key left out, an unknown key are all read
    (P + DEC + ",", True),
    (P + DEC + ", ", True),
    (P + DEC + ",  ", True),
    (P + DEC.replace("accept rate: 0.45, ", ""), True),
    (P + DEC.replace("cuda graph", "tpu graph"), True),
    (P + DEC.replace("True", "true"), False),  # a graph flag that is not True or False
    (P + PRE + " ", True),
]
PLAIN_LIMITS = [
    ("[2026-11-29 10:00:05]  two spaces after the bracket", True),
    ("[2026-11-29T10:00:05] T between date and clock", True),
    ("[2026-11-29 10:00:05 ] a space and no rank", False),
    ("[2026-11-2 10:00:05] a short date", False),
    ("[10:00:5] a short clock", False),
    ("[10:00:05", False),
]


@pytest.mark.parametrize("kind, cases", [("decode", LIMITS), ("http", PLAIN_LIMITS), ("http", LIMITS)])
def test_the_shapes_limits(kind: str, cases: list[tuple[str, bool]]) -> None:
    lines = [line for line, _ in cases]
    kinds = [kind] * len(lines)
    assert_same_takes(kinds, lines)
    _, left, _ = native()(list(range(len(lines))), kinds, lines)
    if cases is not LIMITS or kind == "decode":  # each shape's own limits
        assert [i not in left for i in range(len(lines))] == [want for _, want in cases]
    nums = list(range(1, len(lines) + 1))
    assert both(nums, kinds, lines)[0] == both(nums, kinds, lines)[1]


def test_the_benchmark_log_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    generate(path, 20_000)
    lines = path.read_text().splitlines()
    rnd = random.Random(5)
    for line, _ in ODD + LIMITS + PLAIN_LIMITS:
        lines.insert(rnd.randrange(len(lines)), line)
    path.write_text("\n".join(lines) + "\n")
    batches = list(iter_file(path))
    fast = b"".join(json_lines(batches, ENC, native()))
    assert fast == b"".join(json_lines(batches, ENC, None))
    left = sum(len(native()(*b)[1]) for b in batches)
    assert left < len(lines) * 0.05, "the C writer takes the benchmark's stats and plain lines"


def test_the_mixed_versions_log_byte_for_byte_and_taken(tmp_path: Path) -> None:
    """Stats lines of every release's and option's shape (benchmarks/mixed_log.py): the C
    writer reads them key by key, takes every one, and writes the Python layer's bytes."""
    path = tmp_path / "mixed.log"
    generate_mixed(path, 20_000)
    batches = list(iter_file(path))
    assert b"".join(json_lines(batches, ENC, native())) == b"".join(json_lines(batches, ENC, None))
    for nums, kinds, raws in batches:
        left = native()(nums, kinds, raws)[1]
        assert not [raws[i] for i in left if kinds[i] in ("decode", "prefill")]


@pytest.mark.parametrize("key", sorted(STAT_KEYS))
def test_each_key_of_the_record_way_is_read_by_the_c_writer(key: str) -> None:
    """The C writer's key table is record.STAT_KEYS: a line holding only that key (after
    another release's head) is taken, with the Record way's value."""
    value = {int: "42", float: "4.25", bool: "False"}[STAT_KEYS[key][1]]
    raw = f"{P}Decode batch. {key}: {value}, unknown: 1"
    data, left, _ = native()([1], ["decode"], [raw])
    assert not left, raw
    assert json.loads(data) == json.loads(ENC(Record(1, "decode", raw).to_json()))


ALPHABET = '0123456789 ,.:-_[]#ATPXZ"\\\t\x01\r\né\x7f'


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str]:
    base = draw(
        st.sampled_from(
            [
                P + DEC,
                "[2026-11-29 10:00:05.123 DP1 TP3] " + DEC.replace("accept len: 2.80, accept rate: 0.45, ", "") + ", ",
                P + PRE,
                '[2026-11-29 10:00:05] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK',
                "[10:00:05 TP0 EP0] WARNING: no date",
                *(line for line, _ in ODD if " batch" in line and "\n" not in line),
            ]
        )
    )
    chars = list(base)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        c = draw(st.sampled_from(ALPHABET))
        if op == "insert":
            chars.insert(i, c)
        elif chars and i < len(chars):
            if op == "delete":
                del chars[i]
            else:
                chars[i] = c
    return draw(st.sampled_from(KINDS)), "".join(chars)


@settings(max_examples=400, deadline=None)
@given(st.lists(mutated(), min_size=1, max_size=6))
def test_mutated_lines_byte_for_byte(lines: list[tuple[str, str]]) -> None:
    kinds, raws = [k for k, _ in lines], [r for _, r in lines]
    nums = list(range(10, 10 + len(raws)))
    fast, python = both(nums, kinds, raws)
    assert fast == python
    assert_same_takes(kinds, raws)


def test_bad_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        native()([1, 2], ["decode"], [P + DEC])
    with pytest.raises(TypeError):
        native()(1, ["decode"], [P + DEC])
    data, left, at = native()([1, 2], ["decode", "decode"], [None, P + DEC])  # type: ignore[list-item]  # not a str: left
    assert left == [0] and at == [0] and data.count(b"\n") == 1
