"""What in a starting server's log says its start failed while its process lives on.

SGLang 0.5.23 binds its HTTP port only once the model has loaded (minutes for a large model).
When something took the port meanwhile (another server launched on it by hand, or an
outgoing connection given it as its ephemeral port), uvicorn logs asyncio's bind error and
its HTTP server ends, but SGLang's process does not: its schedulers keep the GPUs, nothing
ever answers, and the run would read "starting" for ever. ``StartLog.scan`` reads what a
starting run's log gained since its last look, in bounded reads, and returns the
``StartFailure`` that line makes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from server_control.host import ports
from server_control.sanitize import strip_controls

# asyncio's own words for a failed bind (base_events.create_server), which uvicorn's startup
# logs at ERROR: "[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000):
# address already in use" (IPv6: "('::1', 30000, 0, 0)").
BIND_FAILED_RE = re.compile(
    r"error while attempting to bind on address \(\s*'(?P<host>[^']*)',\s*(?P<port>\d+)[^)]*\):\s*address already in use",
    re.IGNORECASE,
)
READ_CAP = 256 * 1024  # bytes read per scan (a start's log is read across scans, never skipped)
LINE_CAP = 8192  # a longer line is cut to this before it is matched


@dataclass(frozen=True)
class StartFailure:
    """A failed start the log shows: the line, the address it could not bind, and who
    listens there now (``pid (command)`` each; empty when nobody does or it is not visible)."""

    line: str
    host: str
    port: int
    holders: tuple[str, ...] = ()

    def words(self) -> str:
        held = f": held by {', '.join(self.holders)}" if self.holders else ""
        return f"its HTTP port {self.host}:{self.port} was taken before it could bind it (address already in use{held})"


def failure_in(line: str) -> StartFailure | None:
    """The start failure one log line shows, or None."""
    m = BIND_FAILED_RE.search(line)
    if m is None:
        return None
    return StartFailure(line=strip_controls(line.strip())[:LINE_CAP], host=m["host"], port=int(m["port"]))


def with_holders(failure: StartFailure) -> StartFailure:
    """The failure, naming who listens on its port now (psutil; nothing when not visible)."""
    try:
        held = ports.listeners(failure.port)
    except OSError:
        held = []
    names = tuple(f"pid {pid} ({_one_line(cmd)})" if pid else "a process this user cannot see" for pid, cmd in held)
    return StartFailure(failure.line, failure.host, failure.port, names)


def _one_line(cmd: str, cap: int = 120) -> str:
    """A command line as one short line (a `python -c` script's newlines are spaces)."""
    return " ".join(strip_controls(cmd).split())[:cap]


class StartLog:
    """Reads one starting run's log forward from where it last stopped (at most ``READ_CAP``
    bytes a scan; a partial last line is kept for the next scan, cut at ``LINE_CAP``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.offset = 0
        self._partial = b""

    def scan(self) -> StartFailure | None:
        """The first start failure in what the log gained since the last scan, or None (also
        when the log cannot be read: it may not exist yet)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            data = os.pread(fd, READ_CAP, self.offset)
        except OSError:
            return None
        finally:
            os.close(fd)
        if not data:
            return None
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[:LINE_CAP]
        for raw in lines:
            failure = failure_in(raw[:LINE_CAP].decode("utf-8", "replace"))
            if failure is not None:
                return with_holders(failure)
        return None
