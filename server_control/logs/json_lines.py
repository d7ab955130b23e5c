"""Records as JSON lines (the log record contract, docs/logs.md), fast for a whole file.

``specconsole logs FILE --parse --json`` spends its time per line: a ``Record`` object,
its prefix parse, its fields dict, the contract dict, the encoder. SGLang 0.5.23's own
Decode and Prefill lines, most of a busy server's log, are written here without any of
them: one regex match of the whole line checks that it has exactly the known shape, its
digits are valid JSON numbers as they stand (no leading zeros; the message has no quote,
backslash or control character), and a template puts them in the contract's key order.
Every other line (other shapes, other releases, other kinds) goes the ``Record`` way and
msgspec's encoder. Both give the same JSON values (tests/logs/test_json_lines.py compares
them line by line on the benchmark's log and on odd lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from server_control.logs.record import DECODE, JSON_KEYS, PREFILL, Record

_INT = r"(?P<%s>0|[1-9]\d*)"
_FLOAT = r"(?P<%s>(?:0|[1-9]\d*)\.\d+)"
_PREFIX = (
    r"\[(?P<date>\d{4}-\d\d-\d\d) (?P<clock>\d\d:\d\d:\d\d(?:\.\d{1,9})?)"
    r"(?: (?P<rank>[A-Z]{2,3}\d+(?: [A-Z]{2,3}\d+)*))?\] "
)
_DECODE = re.compile(
    _PREFIX
    + "(?P<text>Decode batch[.,] #running-req: "
    + _INT % "running_req"
    + ", #(?:full )?token: "
    + _INT % "num_tokens"
    + ", (?:full )?token usage: "
    + _FLOAT % "token_usage"
    + ", (?:accept len: "
    + _FLOAT % "accept_len"
    + ", accept rate: "
    + _FLOAT % "accept_rate"
    + ", )?(?:cuda|cpu|npu) graph: "
    r"(?P<cuda_graph>True|False), gen throughput \(token/s\): "
    + _FLOAT % "gen_throughput"
    + ", #queue-req: "
    + _INT % "queue_req"
    + "(?:, )?)"
)
_PREFILL = re.compile(
    _PREFIX
    + "(?P<text>Prefill batch[.,] #new-seq: "
    + _INT % "new_seq"
    + ", #new-token: "
    + _INT % "new_token"
    + ", #cached-token: "
    + _INT % "cached_token"
    + ", (?:full )?token usage: "
    + _FLOAT % "token_usage"
    + ", #running-req: "
    + _INT % "running_req"
    + ", #queue-req: "
    + _INT % "queue_req"
    + "(?:, )?)"
)


def _template(kind: str, present: frozenset[str], rank: bool) -> str:
    """``{"line":%(line)s,"kind":...}``: the contract's keys in its order, a %(name)s for each
    key the line has (its unmatched groups read "null"), null for the others."""
    parts = []
    for key in JSON_KEYS:
        if key == "kind":
            parts.append(f'"kind":"{kind}"')
        elif key == "ts":
            parts.append('"ts":"%(date)sT%(clock)s"')
        elif key in ("text", "rank"):
            parts.append(f'"{key}":"%({key})s"' if key == "text" or rank else f'"{key}":null')
        elif key == "line" or key in present:
            parts.append(f'"{key}":%({key})s')
        else:
            parts.append(f'"{key}":null')
    return "{" + ",".join(parts) + "}\n"


def _templates(kind: str, pattern: re.Pattern[str]) -> tuple[str, str]:
    present = frozenset(pattern.groupindex)
    return _template(kind, present, False), _template(kind, present, True)  # without, with a rank


_DECODE_T = _templates(DECODE, _DECODE)
_PREFILL_T = _templates(PREFILL, _PREFILL)
_BOOL = {"True": "true", "False": "false"}


def fast_json(line: int, kind: str, raw: str) -> str | None:
    """The JSON line of an SGLang 0.5.23 Decode/Prefill line, else None (take the Record way)."""
    if kind == DECODE:
        m = _DECODE.fullmatch(raw)
        if m is None:
            return None
        values = m.groupdict("null")
        values["cuda_graph"] = _BOOL[values["cuda_graph"]]
        templates = _DECODE_T
    elif kind == PREFILL:
        m = _PREFILL.fullmatch(raw)
        if m is None:
            return None
        values = m.groupdict("null")
        templates = _PREFILL_T
    else:
        return None
    values["line"] = str(line)
    return templates[values["rank"] != "null"] % values


def json_lines(
    columns: Iterable[tuple[Sequence[int], Sequence[str], Sequence[str]]], encode: Callable[[Any], bytes]
) -> Iterable[bytes]:
    """UTF-8 JSON lines of every record in ``columns`` (``Parser.feed``'s batches), one bytes per batch;
    ``encode`` (msgspec's ``Encoder.encode``) writes the records the fast path does not take."""
    for nums, kinds, raws in columns:
        out = []
        for n, k, r in zip(nums, kinds, raws):
            fast = fast_json(n, k, r)
            out.append(fast if fast is not None else encode(Record(n, k, r).to_json()).decode() + "\n")
        yield "".join(out).encode("utf-8", "replace")
