"""SGLang's log line format: `[YYYY-MM-DD HH:MM:SS{ TPr if tp>1}] msg`, one write per line.

SGLANG_LOG_MS=1 adds milliseconds, as SGLang does. Each line is written with a single
os.write, so lines from several processes sharing one log file never interleave.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server_control.sim.stats import Stats


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


def prefill_line(new_seqs: int, new_tokens: int, s: Stats, queued: int) -> str:
    """SGLang's prefill log line (the fields the console's parser reads)."""
    return (
        f"Prefill batch, #new-seq: {new_seqs}, #new-token: {new_tokens}, #cached-token: 0, "
        f"token usage: {s.token_usage:.2f}, #running-req: {s.running}, #queue-req: {queued}"
    )


def decode_line(s: Stats, queued: int, spec: bool) -> str:
    """SGLang's decode log line; accept len/rate only for a speculative server."""
    text = f"Decode batch, #running-req: {s.running}, #token: {s.tokens_in_use}, token usage: {s.token_usage:.2f}, "
    if spec:
        text += f"accept len: {s.accept_length:.2f}, accept rate: {s.accept_rate:.2f}, "
    return text + f"cuda graph: True, gen throughput (token/s): {s.gen_throughput:.2f}, #queue-req: {queued}"
