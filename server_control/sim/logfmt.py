"""SGLang's log line format: `[YYYY-MM-DD HH:MM:SS{ TPr if tp>1}] msg`, one write per line.

SGLANG_LOG_MS=1 adds milliseconds, as SGLang does. Each line is written with a single
os.write, so lines from several processes sharing one log file never interleave.
"""
from __future__ import annotations

import os
import sys
import time


def rank_tag(tp_rank: int | None, tp_size: int) -> str:
    if tp_rank is None or tp_size <= 1:
        return ""
    return f"TP{tp_rank}"


def stamp(now: float | None = None) -> str:
    now = time.time() if now is None else now
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    if os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true", "yes"):
        text += f".{int((now % 1) * 1000):03d}"
    return text


def format_line(msg: str, tag: str = "", now: float | None = None) -> str:
    inner = stamp(now) + (f" {tag}" if tag else "")
    return f"[{inner}] {msg}"


class Logger:
    """Writes SGLang-format lines for one process (main: no tag; workers: TPr)."""

    def __init__(self, tag: str = "", fd: int | None = None) -> None:
        self.tag = tag
        self.fd = sys.stderr.fileno() if fd is None else fd

    def write_raw(self, text: str) -> None:
        data = (text if text.endswith("\n") else text + "\n").encode("utf-8", "replace")
        try:
            while data:
                n = os.write(self.fd, data)
                data = data[n:]
        except OSError:
            pass  # the log file or terminal went away: keep running

    def info(self, msg: str) -> None:
        self.write_raw(format_line(msg, self.tag))

    def warning(self, msg: str) -> None:
        self.info(msg)

    def error(self, msg: str) -> None:
        self.info(msg)
