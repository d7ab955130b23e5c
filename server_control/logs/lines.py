"""Bytes -> clean lines: invalid UTF-8 replaced, ANSI escapes and control characters removed,
a partial last line held until its newline, absurdly long lines cut (never silently)."""

from __future__ import annotations

from server_control.sanitize import clean_bytes

MAX_LINE_BYTES = 8 << 20  # a "line" longer than this is cut here (the rest until "\n" dropped)


class LineSplitter:
    """Feed byte chunks; get back (lines, text) for the complete lines so far."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = b""
        self._skipping = False  # inside an over-long line, dropping until its newline
        self.cut_lines = 0  # lines cut at max_line_bytes

    @property
    def partial(self) -> bytes:
        return self._partial

    def feed(self, data: bytes) -> tuple[list[str], str]:
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return [], ""
            data = data[nl + 1 :]
            self._skipping = False
        if self._partial:
            data = self._partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > self.max_line_bytes:
                self._partial = b""
                self._skipping = True
                self.cut_lines += 1
                return self._lines(data[: self.max_line_bytes])
            self._partial = data
            return [], ""
        self._partial = data[cut + 1 :]
        if len(self._partial) > self.max_line_bytes:
            head = self._partial[: self.max_line_bytes]
            self._partial = b""
            self._skipping = True
            self.cut_lines += 1
            return self._lines(data[:cut] + b"\n" + head)
        return self._lines(data[:cut])

    def flush(self) -> tuple[list[str], str]:
        """The held partial line as a line of its own (end of file, or the file changed)."""
        data, self._partial = self._partial, b""
        self._skipping = False
        if not data:
            return [], ""
        return self._lines(data)

    def _lines(self, data: bytes) -> tuple[list[str], str]:
        text = clean_bytes(data)
        return text.split("\n"), text
