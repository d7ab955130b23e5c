"""Free TCP ports on the loopback (or a given) interface."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; a race with another binder
    remains possible, so callers that start a server still handle 'address in use')."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
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
