"""Free TCP ports on the loopback (or a given) interface."""

from __future__ import annotations

import socket
import threading

# Ports this process has handed out: the OS can give one free port to two calls made before
# either is bound (a fleet's gateway and its members' profiles, two remote members' tunnels).
_handed_out: set[tuple[str, int]] = set()
_lock = threading.Lock()
_TRIES = 64


def _os_free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now that this process has not handed out before (the
    OS picks it; a race with another process's binder remains possible, so callers that
    start a server still handle 'address in use')."""
    with _lock:
        port = _os_free_port(host)
        for _ in range(_TRIES):
            if (host, port) not in _handed_out:
                break
            port = _os_free_port(host)
        _handed_out.add((host, port))  # after 64 repeats (never seen) the last one, as before
        return port


def listeners(port: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes listening on TCP ``port`` (those this user may
    see; pid 0 where the socket's owner is not visible)."""
    import psutil  # noqa: PLC0415 - only this function needs it

    from server_control.sanitize import strip_controls  # noqa: PLC0415

    out: dict[int, str] = {}
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return []
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
            pid = c.pid or 0
            try:
                cmd = " ".join(psutil.Process(pid).cmdline()) if pid else "?"
            except psutil.Error:
                cmd = "?"
            out.setdefault(pid, strip_controls(cmd)[:200])
    return sorted(out.items())
