"""`Record`: one parsed log record (a line, or a grouped multi-line traceback).

Only ``line``, ``kind`` and ``raw`` are set when the record is made; everything else
(time stamp, rank, message text, the numeric fields) is parsed from ``raw`` on first
access and cached, so that a million lines can be classified and stored without parsing
each one. ``to_json()`` gives exactly the keys of the log record contract
(docs/architecture.md, docs/logs.md).
"""

from __future__ import annotations

import math
import re
from typing import Any

from server_control.protocol import decision

DECODE = "decode"
PREFILL = "prefill"
READY = "ready"
SPEC_INIT = "spec_init"
SPEC_SWITCH = "spec_switch"
HTTP = "http"
ERROR = "error"
TRACEBACK = "traceback"
WARNING = "warning"
OTHER = "other"
CONSOLE = "console"  # a line the console adds to its own store (never parsed from a file)
KINDS = (DECODE, PREFILL, READY, SPEC_INIT, SPEC_SWITCH, HTTP, ERROR, TRACEBACK, WARNING, OTHER, CONSOLE)

DISPLAY_CAP = 2000  # characters; longer lines are kept whole but marked ``long``


def is_long(raw: str, cap: int = DISPLAY_CAP) -> bool:
    """True when a line of ``raw`` is longer than ``cap`` characters (shown cut)."""
    return len(raw) > cap and ("\n" not in raw or max(map(len, raw.split("\n"))) > cap)


STAT_FIELDS = (
    "running_req",
    "queue_req",
    "token_usage",
    "num_tokens",
    "gen_throughput",
    "accept_len",
    "accept_rate",
    "cuda_graph",
    "new_seq",
    "new_token",
    "cached_token",
    "input_throughput",
)
SPEC_FIELDS = ("threshold", "mode", "batch")
JSON_KEYS = ("line", "kind", "ts", "rank", "text") + STAT_FIELDS + SPEC_FIELDS

# SGLang's own prefix, wherever it sits in the line (another logger may wrap it):
# [2026-11-29 10:00:00 TP0], [2026-11-29 10:00:00.123 DP3 TP3], [10:00:00 TP0 EP0].
_SGLANG_PREFIX = re.compile(
    r"\[(?:(\d{4}-\d\d-\d\d)[ T])?(\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)"
    r"((?: (?:[A-Z]{1,6}_)?[A-Z]{2,3}\d+)*)\] ?"
)
_GPU_PREFIX = re.compile(r"\[(gpu_id=\d+|gpu=\d+)\] ?")
_PREFIX_WINDOW = 240  # a wrapping logger's prefix must end within this many characters
# Prefixes of other loggers when no SGLang prefix is present.
_ISO_START = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)(Z|[+-]\d\d:?\d\d)?\s*")
_LEVEL_DATE_START = re.compile(
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d (\d\d:\d\d:\d\d(?:\.\d+)?)"
    r"\s+(?:\[[^\]]*\]\s+)?"
)
_SYSLOG_START = re.compile(r"[A-Z][a-z]{2} [ \d]\d (\d\d:\d\d:\d\d) \S+ [^:\s]+: ")

# "key: value" pairs of the Decode/Prefill stat lines.
STAT_KEYS = {
    "#running-req": ("running_req", int),
    "#queue-req": ("queue_req", int),
    "token usage": ("token_usage", float),
    "full token usage": ("token_usage", float),
    "#token": ("num_tokens", int),
    "#full token": ("num_tokens", int),
    "gen throughput (token/s)": ("gen_throughput", float),
    "accept len": ("accept_len", float),
    "accept rate": ("accept_rate", float),
    "cuda graph": ("cuda_graph", bool),
    "cpu graph": ("cuda_graph", bool),
    "npu graph": ("cuda_graph", bool),
    "#new-seq": ("new_seq", int),
    "#new-token": ("new_token", int),
    "#cached-token": ("cached_token", int),
    "input throughput (token/s)": ("input_throughput", float),
}
_NULLS = dict.fromkeys(STAT_FIELDS + SPEC_FIELDS)
_INIT_THRESHOLD = re.compile(r"threshold=(\d+)")
_SWITCH = re.compile(r"switched to (target-only|target_only|speculative)\b(?: \(([^)]*)\))?")
_BATCH = re.compile(r"decode batch (\d+)")
_THRESHOLD = re.compile(r"threshold (\d+)")


# SGLang 0.5.23's own Decode and Prefill lines, whole (docs: /work/shared/docs): one match
# gives every number (3x the pair-by-pair parse below, which stays for every other shape:
# other releases, other orders, extra keys). Numbers as the pair parse reads them.
_INT, _FLOAT = r"(\d+)", r"(\d+\.\d+)"
_DECODE_LINE = re.compile(
    rf"Decode batch[.,] #running-req: {_INT}, #(?:full )?token: {_INT}, (?:full )?token usage: {_FLOAT}, "
    rf"(?:accept len: {_FLOAT}, accept rate: {_FLOAT}, )?(?:cuda|cpu|npu) graph: (True|False), "
    rf"gen throughput \(token/s\): {_FLOAT}, #queue-req: {_INT}(?:, )?"
)
_PREFILL_LINE = re.compile(
    rf"Prefill batch[.,] #new-seq: {_INT}, #new-token: {_INT}, #cached-token: {_INT}, "
    rf"(?:full )?token usage: {_FLOAT}, #running-req: {_INT}, #queue-req: {_INT}(?:, )?"
)


def _fast_stats(text: str) -> dict[str, Any] | None:
    """The numbers of an SGLang 0.5.23 Decode/Prefill line in one match, else None."""
    m = _DECODE_LINE.fullmatch(text)
    if m is not None:
        running, tokens, usage, alen, arate, graph, gen, queue = m.groups()
        out: dict[str, Any] = {"running_req": int(running), "num_tokens": int(tokens), "token_usage": float(usage)}
        if alen is not None:
            out["accept_len"] = float(alen)
            out["accept_rate"] = float(arate)
        out["cuda_graph"] = graph == "True"
        out["gen_throughput"] = float(gen)
        out["queue_req"] = int(queue)
        return out
    m = _PREFILL_LINE.fullmatch(text)
    if m is not None:
        seqs, new, cached, usage, running, queue = m.groups()
        return {
            "new_seq": int(seqs),
            "new_token": int(new),
            "cached_token": int(cached),
            "token_usage": float(usage),
            "running_req": int(running),
            "queue_req": int(queue),
        }
    return None


def parse_stats(text: str) -> dict[str, Any]:
    """The Decode/Prefill batch numbers in ``text``; keys from STAT_FIELDS only.
    SGLang 0.5.23's own lines in one match (``_fast_stats``); any other shape pair by pair."""
    fast = _fast_stats(text)
    return fast if fast is not None else parse_stat_pairs(text)


def parse_stat_pairs(text: str) -> dict[str, Any]:
    """Pieces are ", "-separated "key: value" pairs; the first key may carry the
    "Decode batch. " / "Prefill batch(mixed ...). " head in front of it."""
    out: dict[str, Any] = {}
    keys = STAT_KEYS
    for part in text.split(", "):
        key, sep, value = part.rpartition(": ")
        if not sep:
            continue
        spec = keys.get(key)
        if spec is None:
            spec = keys.get(key.rpartition(". ")[2].strip())
            if spec is None:
                continue
        name, kind = spec
        value = value.strip().rstrip(",")
        if kind is bool:
            if value == "True" or value == "False":
                out[name] = value == "True"
            continue
        try:
            number = kind(value)
        except ValueError:
            continue
        if kind is float and not math.isfinite(number):
            continue  # nan/inf would not be valid JSON
        out[name] = number
    return out


def parse_spec(kind: str, text: str) -> dict[str, Any]:
    """threshold (spec_init); mode, batch, threshold (spec_switch)."""
    if kind == SPEC_INIT:
        m = _INIT_THRESHOLD.search(text)
        return {"threshold": int(m.group(1)) if m else None}
    m = _SWITCH.search(text)
    if m is None:
        return {}
    why = m.group(2) or ""
    batch = _BATCH.search(why)
    threshold = _THRESHOLD.search(why)
    return {
        "mode": m.group(1).replace("-", "_"),
        "batch": int(batch.group(1)) if batch else None,
        "threshold": int(threshold.group(1)) if threshold else None,
    }


def parse_prefix(first_line: str) -> tuple[str | None, str | None, int]:
    """(ts, rank, offset of the message) from a record's first line."""
    m = _SGLANG_PREFIX.search(first_line, 0, _PREFIX_WINDOW)
    if m is not None:
        date, clock, ranks = m.groups()
        clock = clock.replace(",", ".")
        return (f"{date}T{clock}" if date else clock), (ranks.strip() or None), m.end()
    m = _GPU_PREFIX.search(first_line, 0, 80)
    if m is not None:
        return None, m.group(1), m.end()
    m = _ISO_START.match(first_line)
    if m is not None:
        date, clock, zone = m.groups()
        return f"{date}T{clock.replace(',', '.')}{zone or ''}", None, m.end()
    m = _LEVEL_DATE_START.match(first_line) or _SYSLOG_START.match(first_line)
    if m is not None:
        return m.group(1), None, m.end()
    return None, None, 0


class Record:
    """One log record. ``seq`` is the store's sequence number (0 before it is stored)."""

    __slots__ = ("seq", "line", "kind", "raw", "_ts", "_rank", "_at", "_fields")

    def __init__(self, line: int, kind: str, raw: str, seq: int = 0) -> None:
        self.seq = seq
        self.line = line
        self.kind = kind
        self.raw = raw
        self._at = -1
        self._fields: dict[str, Any] | None = None

    def _prefix(self) -> None:
        raw = self.raw
        nl = raw.find("\n")
        self._ts, self._rank, self._at = parse_prefix(raw if nl < 0 else raw[:nl])

    @property
    def ts(self) -> str | None:
        if self._at < 0:
            self._prefix()
        return self._ts

    @property
    def rank(self) -> str | None:
        if self._at < 0:
            self._prefix()
        return self._rank

    @property
    def text(self) -> str:
        """The message: the line without SGLang's (or a wrapping logger's) prefix."""
        if self._at < 0:
            self._prefix()
        return self.raw[self._at :]

    @property
    def long(self) -> bool:
        """True when a line of this record is longer than DISPLAY_CAP characters."""
        return is_long(self.raw)

    @property
    def fields(self) -> dict[str, Any]:
        """The parsed numeric/spec fields present in this record (absent ones left out)."""
        if self._fields is None:
            kind = self.kind
            if kind == DECODE or kind == PREFILL:
                self._fields = parse_stats(self.text)
            elif kind == SPEC_INIT or kind == SPEC_SWITCH:
                self._fields = parse_spec(kind, self.text)
            else:
                self._fields = {}
        return self._fields

    def get(self, name: str) -> Any:
        return self.fields.get(name)

    def to_json(self) -> dict[str, Any]:
        """Exactly the contract keys, in contract order; absent fields are None."""
        out = {"line": self.line, "kind": self.kind, "ts": self.ts, "rank": self.rank, "text": self.text, **_NULLS}
        out.update(self.fields)
        return out

    def __repr__(self) -> str:
        return f"Record(seq={self.seq}, line={self.line}, kind={self.kind!r}, raw={self.raw[:60]!r})"


def _field_property(name: str) -> property:
    return property(lambda self: self.fields.get(name), doc=f"`{name}` or None")


for _name in STAT_FIELDS + SPEC_FIELDS:
    setattr(Record, _name, _field_property(_name))
del _name

# Names used by the classifier (kept here so record.py holds the whole vocabulary).
INIT_PREFIX = decision.INIT_PREFIX
SWITCH_PREFIX = decision.SWITCH_PREFIX
NOT_ACTIVE_PREFIX = decision.NOT_ACTIVE_PREFIX
