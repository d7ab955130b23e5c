"""SGLang log lines -> records: classify each line, group multi-line Python tracebacks.

The hot path is one list comprehension of substring tests per chunk of lines; a regex
runs only on the few lines whose substrings suggest an error or a warning, and tracebacks
are found per chunk (``str.find``) before the lines around them are walked one by one. Numbers are parsed later, on
first access (see ``record.Record``).

``Parser.feed(lines)`` returns three columns (line numbers, kinds, raw texts) that
``LogStore.extend_columns`` takes as they are; ``parse_text``/``parse_bytes`` give
``Record`` objects for everything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from server_control.logs.record import (
    DECODE,
    ERROR,
    HTTP,
    INIT_PREFIX,
    NOT_ACTIVE_PREFIX,
    OTHER,
    PREFILL,
    READY,
    SPEC_INIT,
    SPEC_SWITCH,
    SWITCH_PREFIX,
    TRACEBACK,
    WARNING,
    Record,
)

TRACEBACK_HEAD = "Traceback (most recent call last)"
_CHAIN_LINES = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
MAX_TRACEBACK_LINES = 5000
MAX_EXCEPTION_TAIL = 20  # lines after "ValueError: ..." that still belong to it

_LEVEL = re.compile(r"\b(ERROR|CRITICAL|FATAL|WARNING|WARN)\b")
_ERRORISH = re.compile(r"(?:Error|Exception)\b|exception|sigquit|Segmentation fault|out of memory|\bKilled\b")
_WARNINGISH = re.compile(r"\bWARN(?:ING)?\b|Warning\b|warning")
# A line that starts a new log record (so it cannot continue a traceback).
_RECORD_START = re.compile(
    r"\[|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[A-Z][a-z]{2} [ \d]\d \d\d:|"
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|\(\w+ pid=\d+\)"
)


def _suspicious(s: str) -> bool:
    """Cheap substring tests (no regex) for a line that may be an error or a warning."""
    return (
        "rror" in s
        or "RROR" in s
        or "xception" in s
        or "WARN" in s
        or "arning" in s
        or "CRITICAL" in s
        or "FATAL" in s
        or "sigquit" in s
        or "Segmentation fault" in s
        or "out of memory" in s
        or "Killed" in s
    )


def classify_rare(line: str) -> str:
    """Kind of a line that is not a decode, prefill or HTTP line."""
    if "Dynamic speculation" in line:
        if INIT_PREFIX in line:
            return SPEC_INIT
        if SWITCH_PREFIX in line:
            return SPEC_SWITCH
        if NOT_ACTIVE_PREFIX in line:
            return ERROR
        if "refused" in line:
            return WARNING
        return OTHER
    if "fired up and ready" in line:
        return READY
    if not _suspicious(line):
        return OTHER
    level = _LEVEL.search(line, 0, 120)
    if level is not None:
        return WARNING if level.group(1).startswith("WARN") else ERROR
    if _ERRORISH.search(line):
        return ERROR
    if _WARNINGISH.search(line):
        return WARNING
    return OTHER


def classify(line: str) -> str:
    """Kind of one line on its own (a traceback head gives TRACEBACK)."""
    if "Decode batch" in line and "#running-req" in line:
        return DECODE
    if "Prefill batch" in line and "#new-seq" in line:
        return PREFILL
    if " HTTP/1." in line or " HTTP/2" in line:
        return HTTP
    if TRACEBACK_HEAD in line:
        return TRACEBACK
    return classify_rare(line)


def classify_many(lines: list[str]) -> list[str]:
    """Kinds of many lines (no traceback grouping): the hot path."""
    rare = classify_rare
    return [
        DECODE
        if "Decode batch" in s and "#running-req" in s
        else PREFILL
        if "Prefill batch" in s and "#new-seq" in s
        else HTTP
        if " HTTP/1." in s or " HTTP/2" in s
        else rare(s)
        for s in lines
    ]


def _head_indices(text: str) -> list[int]:
    """Indices of the lines of ``text`` holding a traceback head, last first (a stack)."""
    out: list[int] = []
    index = 0
    pos = 0
    find, count = text.find, text.count
    while True:
        at = find(TRACEBACK_HEAD, pos)
        if at < 0:
            break
        index += count("\n", pos, at)
        if not out or out[-1] != index:
            out.append(index)
        pos = at + len(TRACEBACK_HEAD)
    out.reverse()
    return out


class _Traceback:
    __slots__ = ("line", "lines", "state", "tail", "held")

    def __init__(self, line: int, first: str) -> None:
        self.line = line
        self.lines = [first]
        self.state = "frames"  # frames -> exception -> (blank) -> chain -> frames ...
        self.tail = 0  # lines taken after the exception line
        self.held: list[str] = []  # blank lines that may precede a chained traceback


class Parser:
    """Incremental: feed lists of complete lines in file order; line numbers are 1-based."""

    def __init__(self, first_line: int = 1) -> None:
        self.next_line = first_line
        self._tb: _Traceback | None = None

    @property
    def pending(self) -> bool:
        """True while a traceback is held open, waiting for its end."""
        return self._tb is not None

    def reset(self, first_line: int = 1) -> tuple[list[int], list[str], list[str]]:
        """Start over (a new file): returns what was pending, closed."""
        out = self.flush()
        self.next_line = first_line
        return out

    def flush(self) -> tuple[list[int], list[str], list[str]]:
        """Close a held traceback (end of file, or the writer went quiet)."""
        nums: list[int] = []
        kinds: list[str] = []
        raws: list[str] = []
        self._close(nums, kinds, raws)
        return nums, kinds, raws

    def feed(self, lines: list[str], text: str | None = None) -> tuple[list[int], list[str], list[str]]:
        """Parse complete lines (``text``: the same lines joined, if the caller has it)."""
        n = len(lines)
        start = self.next_line
        self.next_line = start + n
        if text is None:
            text = "\n".join(lines)
        if self._tb is None:
            if TRACEBACK_HEAD not in text:  # the hot path
                return list(range(start, start + n)), classify_many(lines), lines
        nums: list[int] = []
        kinds: list[str] = []
        raws: list[str] = []
        heads = _head_indices(text)
        i = 0
        while i < n:
            if self._tb is not None:
                i = self._continue(lines, i, nums, kinds, raws)
                continue
            while heads and heads[-1] < i:
                heads.pop()
            j = heads.pop() if heads else n
            if j > i:
                nums.extend(range(start + i, start + j))
                kinds.extend(classify_many(lines[i:j]))
                raws.extend(lines[i:j])
            if j < n:
                self._tb = _Traceback(start + j, lines[j])
                j += 1
            i = j
        return nums, kinds, raws

    def _continue(self, lines: list[str], i: int, nums: list[int], kinds: list[str], raws: list[str]) -> int:
        """Take lines[i:] into the open traceback; return the index of the first line
        that does not belong (the traceback is then closed) or len(lines)."""
        tb = self._tb
        if tb is None:
            return i
        n = len(lines)
        while i < n:
            if len(tb.lines) >= MAX_TRACEBACK_LINES or not _TAKE[tb.state](tb, lines[i]):
                self._close(nums, kinds, raws)
                return i
            i += 1
        return i

    def _close(self, nums: list[int], kinds: list[str], raws: list[str]) -> None:
        tb = self._tb
        if tb is None:
            return
        self._tb = None
        nums.append(tb.line)
        kinds.append(TRACEBACK)
        raws.append("\n".join(tb.lines))
        at = tb.line + len(tb.lines)
        for k, s in enumerate(tb.held):  # blank lines that turned out not to belong
            nums.append(at + k)
            kinds.append(classify(s))
            raws.append(s)


def _take_frame(tb: _Traceback, s: str) -> bool:
    """In the frames: indented lines and carets, then the exception line."""
    if s[:1] in (" ", "\t") or s.startswith("^"):
        tb.lines.append(s)
    elif not s.strip() or _RECORD_START.match(s):
        return False
    else:
        tb.lines.append(s)  # "ValueError: boom"
        tb.state, tb.tail = "exception", 0
    return True


def _take_exception(tb: _Traceback, s: str) -> bool:
    """After the exception line: a few more lines of its message, a blank or a chain line."""
    if not s.strip():
        tb.held.append(s)
        tb.state = "blank"
    elif s in _CHAIN_LINES:
        tb.lines.append(s)
        tb.state = "chain"
    elif tb.tail < MAX_EXCEPTION_TAIL and not _RECORD_START.match(s) and TRACEBACK_HEAD not in s:
        tb.lines.append(s)
        tb.tail += 1
    else:
        return False
    return True


def _take_blank(tb: _Traceback, s: str) -> bool:
    """Blank lines held until a chain line says they belong."""
    if not s.strip() and len(tb.held) < 3:
        tb.held.append(s)
    elif s in _CHAIN_LINES:
        tb.lines.extend(tb.held)
        tb.held = []
        tb.lines.append(s)
        tb.state = "chain"
    else:
        return False
    return True


def _take_chain(tb: _Traceback, s: str) -> bool:
    """After a chain line: blank lines, then the next "Traceback ..." head."""
    if not s.strip():
        tb.lines.append(s)
    elif TRACEBACK_HEAD in s:
        tb.lines.append(s)
        tb.state = "frames"
    else:
        return False
    return True


_TAKE = {"frames": _take_frame, "exception": _take_exception, "blank": _take_blank, "chain": _take_chain}


def records_from_columns(nums: Sequence[int], kinds: Sequence[str], raws: Sequence[str]) -> list[Record]:
    return [Record(n, k, r) for n, k, r in zip(nums, kinds, raws)]


def parse_text(text: str, first_line: int = 1) -> list[Record]:
    """Parse a whole text (already decoded and cleaned): every line, tracebacks grouped."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    parser = Parser(first_line)
    out = records_from_columns(*parser.feed(lines, text))
    out.extend(records_from_columns(*parser.flush()))
    return out


def parse_bytes(data: bytes, first_line: int = 1) -> list[Record]:
    """Parse raw bytes exactly as a file would be read: invalid UTF-8 replaced, ANSI
    escapes and control characters removed, a last line without newline included."""
    from server_control.logs.lines import LineSplitter

    splitter = LineSplitter()
    parser = Parser(first_line)
    out: list[Record] = []
    for lines, text in (splitter.feed(data), splitter.flush()):
        if lines:
            out.extend(records_from_columns(*parser.feed(lines, text)))
    out.extend(records_from_columns(*parser.flush()))
    return out
