"""Records as JSON lines (the log record contract, docs/logs.md), fast for a whole file.

``specconsole logs FILE --parse --json`` the ``Record`` way spends ~4-13 us a line (the
object, its prefix parse, its fields dict, the contract dict, the encoder). Here most lines
are written per batch (``Parser.feed``'s columns) with no Python code per line: a group's
lines are joined, one ``finditer`` over the block checks each line's whole shape, and
``template % match`` (a match is a mapping of its named groups) writes its JSON. A line's
shape variant (rank or none, accept figures or none, cuda graph True or False) is told by
the empty group that closes last (``lastgroup``: conditionals at the pattern's end pick
it), and each variant has its own template with its nulls and booleans written in. The
groups are merged back into file order by iterators (``map(next, ...)``), behind a
``{"line":N,"kind":"K",`` head per line. Three groups:

* Decode and Prefill lines: a block of SGLang 0.5.23's own shape in one ``finditer`` (its
  digits are valid JSON numbers as they stand: ASCII, at most 18 before the point, no leading
  zero; the message has no quote, backslash or control character); a block that does not
  fit goes a line at a time key by key (``stats_body``: any release's shape, the Record
  way's pair rules, each known value clean or the line goes the Record way);
* the kinds without fields (http, other, warning, error, ready), when the line starts with
  SGLang's bracket prefix (the Record way's own prefix pattern, bounded so that it ends well
  within its 240-character window; a ``,`` in the clock goes the Record way): the block is
  JSON-escaped before the match (an escape starts with a backslash, which no prefix holds);
* everything else (spec_init/spec_switch, tracebacks, lines without that prefix) goes the
  ``Record`` way and msgspec's encoder, as does a line of a block that does not fit.

Both ways give the same JSON values and key order (tests/logs/test_json_lines.py compares
them line by line on the benchmark's log and on odd lines).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter
from typing import Any

from server_control.logs.record import (
    DECODE,
    ERROR,
    HTTP,
    JSON_KEYS,
    OTHER,
    PREFILL,
    READY,
    SPEC_FIELDS,
    STAT_FIELDS,
    STAT_KEYS,
    WARNING,
    Record,
)

Slow = Callable[[int, str, str], "str | None"]  # (line, kind, raw) -> the whole JSON line

HEAD = '{"line":%d,"kind":"%s",'
_N = r"\d{1,18}"
_F = r"\d{1,18}\.\d+"
_RANKS = r"(?P<rank>(?:[A-Z]{1,6}_)?[A-Z]{2,3}\d{1,6}(?: (?:[A-Z]{1,6}_)?[A-Z]{2,3}\d{1,6}){0,7})"
# (?a): ASCII digits only (int("٣") reads 3; a template would write "٣"). (?m): ^ and $ at
# each line of a block joined by "\n", so that a match is one whole line.
_STATS_HEAD = r"(?am)^\[(?P<date>\d{4}-\d\d-\d\d) (?P<clock>\d\d:\d\d:\d\d(?:\.\d{1,9}|))(?: " + _RANKS + r"|)\] "
_DECODE_BLOCK = re.compile(
    _STATS_HEAD + rf"(?P<text>Decode batch[.,] #running-req: (?P<running_req>{_N}), #(?:full |)token: (?P<num_tokens>{_N}), "
    rf"(?:full |)token usage: (?P<token_usage>{_F}), "
    rf"(?:accept len: (?P<accept_len>{_F}), accept rate: (?P<accept_rate>{_F}), |)"
    rf"(?:cuda|cpu|npu) graph: (?:(?P<graph_true>True)|False), gen throughput \(token/s\): (?P<gen_throughput>{_F}), "
    rf"#queue-req: (?P<queue_req>{_N})(?:, |))"
    r"(?(rank)(?(accept_len)(?(graph_true)(?P<d0>)|(?P<d1>))|(?(graph_true)(?P<d2>)|(?P<d3>)))"
    r"|(?(accept_len)(?(graph_true)(?P<d4>)|(?P<d5>))|(?(graph_true)(?P<d6>)|(?P<d7>))))$"
)
_PREFILL_BLOCK = re.compile(
    _STATS_HEAD + rf"(?P<text>Prefill batch[.,] #new-seq: (?P<new_seq>{_N}), #new-token: (?P<new_token>{_N}), "
    rf"#cached-token: (?P<cached_token>{_N}), (?:full |)token usage: (?P<token_usage>{_F}), "
    rf"#running-req: (?P<running_req>{_N}), #queue-req: (?P<queue_req>{_N})(?:, |))"
    r"(?(rank)(?P<p0>)|(?P<p1>))$"
)
# record._SGLANG_PREFIX at the line's start, bounded (<= 8 ranks of <= 6 digits: it ends by
# column 140 of its 240 window) and with "." only in the clock; "none" when it is not there.
_PLAIN_BLOCK = re.compile(
    r"(?am)^(?:(?P<bracket>\[)(?:(?P<date>\d{4}-\d\d-\d\d)[ T]|)(?P<clock>\d\d:\d\d:\d\d(?:\.\d{1,9}|))"
    rf"(?: {_RANKS}|)\](?: |)|)(?P<text>.*)"
    r"(?(bracket)(?(date)(?(rank)(?P<q0>)|(?P<q1>))|(?(rank)(?P<q2>)|(?P<q3>)))|(?P<none>))$"
)
_LEADING_ZERO = re.compile(r": 0\d")  # in a matched stats line ": " comes before numbers only
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")  # "\n" joins the block, "\t" is replaced first
_SLOW = "\x00"  # the "template" of a line that goes the Record way (no body holds a NUL)
_LASTGROUP = attrgetter("lastgroup")


def _body(ts: str, rank: bool, values: dict[str, str]) -> str:
    """A variant's template after the head: ``ts``, rank from its group or null, text, the
    contract's other keys from ``values`` (a %(group)s or a JSON literal), null for the rest."""
    parts = [f'"ts":"{ts}"', '"rank":"%(rank)s"' if rank else '"rank":null', '"text":"%(text)s"']
    parts.extend(f'"{key}":{values.get(key, "null")}' for key in JSON_KEYS[5:])
    return ",".join(parts) + "}\n"


def _stats_values(keys: Sequence[str]) -> dict[str, str]:
    return {key: f"%({key})s" for key in keys}


_TS = "%(date)sT%(clock)s"
_DECODE_KEYS = ("running_req", "queue_req", "token_usage", "num_tokens", "gen_throughput")
_DECODE_T: dict[str | None, str] = {}
for _i, (_rank, _accept, _graph) in enumerate((r, a, g) for r in (True, False) for a in (True, False) for g in ("true", "false")):
    _values = _stats_values(_DECODE_KEYS + (("accept_len", "accept_rate") if _accept else ()))
    _DECODE_T[f"d{_i}"] = _body(_TS, _rank, {**_values, "cuda_graph": _graph})
_PREFILL_KEYS = ("running_req", "queue_req", "token_usage", "new_seq", "new_token", "cached_token")
_PREFILL_T: dict[str | None, str] = {
    "p0": _body(_TS, True, _stats_values(_PREFILL_KEYS)),
    "p1": _body(_TS, False, _stats_values(_PREFILL_KEYS)),
}
_PLAIN_T: dict[str | None, str] = {
    "q0": _body(_TS, True, {}),
    "q1": _body(_TS, False, {}),
    "q2": _body("%(clock)s", True, {}),
    "q3": _body("%(clock)s", False, {}),
    "none": _SLOW,
}


def _escape(text: str) -> str:
    """``text`` as the inside of a JSON string ("\\n" left alone: it joins the block)."""
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if '"' in text:
        text = text.replace('"', '\\"')
    if "\t" in text:
        text = text.replace("\t", "\\t")
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
    return text


def _bodies(pattern: re.Pattern[str], templates: dict[str | None, str], text: str, n: int) -> list[str] | None:
    """Each line's body (its JSON after the head) by the variant's template, ``_SLOW`` for a
    line to take the Record way; None when the block has not n matches (a line of another shape)
    or a raw held a "\\n" of its own (its two lines could stand in for another that fails)."""
    if text.count("\n") != n - 1:
        return None
    matches = list(pattern.finditer(text))
    if len(matches) != n:
        return None
    return list(map(str.__mod__, map(templates.__getitem__, map(_LASTGROUP, matches)), matches))


def _decode(kinds: list[str], raws: list[str]) -> list[str] | None:
    text = "\n".join(raws)
    return None if _LEADING_ZERO.search(text) else _bodies(_DECODE_BLOCK, _DECODE_T, text, len(raws))


def _prefill(kinds: list[str], raws: list[str]) -> list[str] | None:
    text = "\n".join(raws)
    return None if _LEADING_ZERO.search(text) else _bodies(_PREFILL_BLOCK, _PREFILL_T, text, len(raws))


def _plain(kinds: list[str], raws: list[str]) -> list[str] | None:
    return _bodies(_PLAIN_BLOCK, _PLAIN_T, _escape("\n".join(raws)), len(raws))


# A stats line of any shape, key by key (record.parse_stat_pairs's rules, on the lines whose
# every known value is already a JSON number or a bool): SGLang's bracket prefix at the start
# (the plain kinds' own), the message ASCII without control characters (then ``strip()``
# strips spaces only), each known key's value clean, or the line goes the Record way.
_LINE_HEAD = re.compile(
    r"(?a)\[(?:(?P<date>\d{4}-\d\d-\d\d)[ T]|)(?P<clock>\d\d:\d\d:\d\d(?:\.\d{1,9}|))" rf"(?: {_RANKS}|)\](?: |)"
)
_INT_VALUE = re.compile(r"(?a)0|[1-9]\d{0,17}")
_FLOAT_VALUE = re.compile(r"(?a)(?:0|[1-9]\d{0,17})\.\d+")
_BOOL_VALUE = {"True": "true", "False": "false"}
_CLEAN = {int: _INT_VALUE, float: _FLOAT_VALUE}
_BY_KEY = {key: (STAT_FIELDS.index(name), _CLEAN.get(kind)) for key, (name, kind) in STAT_KEYS.items()}
_UNSTRIPPED = re.compile(r"[\x00-\x1f]")  # str.strip() would strip \x1c-\x1f (and tabs) too
_STATS_T = (
    '"ts":"%s","rank":%s,"text":"%s"'
    + "".join(f',"{key}":%s' for key in STAT_FIELDS)
    + "".join(f',"{key}":null' for key in SPEC_FIELDS)
    + "}\n"
)
_NULL_FIELDS = ["null"] * len(STAT_FIELDS)


def stats_body(raw: str) -> str:
    """A Decode/Prefill line's JSON after its head, its fields read key by key in any order
    (unknown keys skipped, a later key over an earlier), or ``_SLOW`` for the Record way."""
    m = _LINE_HEAD.match(raw)
    if m is None or not raw.isascii() or _UNSTRIPPED.search(raw):
        return _SLOW
    text = raw[m.end() :]
    values = _NULL_FIELDS.copy()
    for part in text.split(", "):
        key, sep, value = part.rpartition(": ")
        if not sep:
            continue
        spec = _BY_KEY.get(key) or _BY_KEY.get(key.rpartition(". ")[2].strip())
        if spec is None:
            continue
        at, clean = spec
        value = value.strip().rstrip(",")
        if clean is None:
            if value not in _BOOL_VALUE:
                return _SLOW
            values[at] = _BOOL_VALUE[value]
        elif clean.fullmatch(value) is None:
            return _SLOW
        else:
            values[at] = value
    date, clock, rank = m.group("date", "clock", "rank")
    if "\\" in text or '"' in text:  # no control characters here: the rest of _escape has nothing to do
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return _STATS_T % (f"{date}T{clock}" if date else clock, f'"{rank}"' if rank else "null", text, *values)


_PLAIN_KINDS = (HTTP, OTHER, WARNING, ERROR, READY)  # kinds whose fields are all null
_GROUPS = {DECODE: 0, PREFILL: 1, **dict.fromkeys(_PLAIN_KINDS, 2)}
_WAYS = (_decode, _prefill, _plain)


def _one_by_one(way: Callable[[list[str], list[str]], list[str] | None], kinds: list[str], raws: list[str]) -> list[str]:
    """A block that did not fit, a line at a time: a stats line key by key, any other a block of one."""
    if way is _decode or way is _prefill:
        return list(map(stats_body, raws))
    out = []
    for k, r in zip(kinds, raws):
        got = way([k], [r])
        out.append(_SLOW if got is None else got[0])
    return out


def fast_bodies(kinds: Sequence[str], raws: Sequence[str]) -> list[str]:
    """Each record's JSON after its ``HEAD``, in order; ``_SLOW`` where the Record way must write it."""
    group = list(map(_GROUPS.get, kinds, repeat(3)))
    streams: list[Iterator[str]] = []
    for g, way in enumerate(_WAYS):
        mask = list(map(g.__eq__, group))
        k, r = list(compress(kinds, mask)), list(compress(raws, mask))
        got = way(k, r) if r else []
        streams.append(iter(got if got is not None else _one_by_one(way, k, r)))
    streams.append(repeat(_SLOW))
    return list(map(next, map(streams.__getitem__, group)))


def fast_lines(nums: Sequence[int], kinds: Sequence[str], raws: Sequence[str], slow: Slow) -> list[str | None]:
    """The JSON line of each record of a batch ("\\n" included), in order; ``slow(line, kind,
    raw)`` writes those the fast groups do not take (tests pass one that returns None)."""
    bodies = fast_bodies(kinds, raws)
    heads = map(HEAD.__mod__, zip(nums, kinds))
    if _SLOW not in bodies:
        return list(map(str.__add__, heads, bodies))
    return [h + b if b != _SLOW else slow(n, k, r) for h, b, n, k, r in zip(heads, bodies, nums, kinds, raws)]


def _load_native() -> Native | None:
    """The C writer (native_json.c, built at install when a C compiler is there), or None:
    then the Python fast groups write every line (the same bytes, slower).
    ``SPECCONSOLE_JSON=python`` asks for the Python way (the benchmark's arm)."""
    if os.environ.get("SPECCONSOLE_JSON") == "python":
        return None
    try:
        from server_control.logs import _native_json  # noqa: PLC0415
    except ImportError:
        return None
    return _native_json.json_batch


Native = Callable[[Sequence[int], Sequence[str], Sequence[str]], tuple[bytes, list[int], list[int]]]
NATIVE = _load_native()


def _python_batch(nums: Sequence[int], kinds: Sequence[str], raws: Sequence[str], encode: Callable[[Any], bytes]) -> bytes:
    bodies = fast_bodies(kinds, raws)
    if _SLOW in bodies:
        for i in [i for i, b in enumerate(bodies) if b == _SLOW]:
            rec = Record(nums[i], kinds[i], raws[i])
            whole = encode(rec.to_json()).decode() + "\n"
            bodies[i] = whole[len(HEAD % (rec.line, rec.kind)) :]
    return "".join(chain.from_iterable(zip(map(HEAD.__mod__, zip(nums, kinds)), bodies))).encode("utf-8", "replace")


def _native_batch(
    native: Native, nums: Sequence[int], kinds: Sequence[str], raws: Sequence[str], encode: Callable[[Any], bytes]
) -> bytes:
    """The C writer's bytes, with the records it left written the Python way and put back in place."""
    data, left, at = native(nums, kinds, raws)
    if not left:
        return data
    rest = _python_batch([nums[i] for i in left], [kinds[i] for i in left], [raws[i] for i in left], encode)
    lines = rest.split(b"\n")  # one a record: JSON escapes a "\n" inside a string
    view, prev = memoryview(data), 0
    parts: list[bytes | memoryview] = []
    for off, line in zip(at, lines):
        parts += (view[prev:off], line, b"\n")
        prev = off
    parts.append(view[prev:])
    return b"".join(parts)


def json_lines(
    columns: Iterable[tuple[Sequence[int], Sequence[str], Sequence[str]]],
    encode: Callable[[Any], bytes],
    native: Native | None = NATIVE,
) -> Iterable[bytes]:
    """UTF-8 JSON lines of every record in ``columns`` (``Parser.feed``'s batches), one bytes per batch;
    ``encode`` (msgspec's ``Encoder.encode``) writes the records the fast groups do not take;
    ``native`` (the C writer; None: Python only) the records it takes."""
    for nums, kinds, raws in columns:
        if nums:
            yield _python_batch(nums, kinds, raws, encode) if native is None else _native_batch(native, nums, kinds, raws, encode)
