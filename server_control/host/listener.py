"""Who answers on a port: is it this run's server?

A profile's URL is only a host and a port; once its server stopped (or before it bound)
another process may take the port, and everything a console reads or sends there would be
about someone else's server. The run's identity is recorded (server_control/state/runs.py: pid,
start time, command line, its other processes); a server is this run's when one of the
run's verified processes holds the listening socket. Reading a process's sockets needs only
/proc of our own processes (no root); ``holder`` (who else holds it, for the message) scans
every process once and is called only when the answer changes.
"""

from __future__ import annotations

from collections.abc import Iterable

import psutil

LISTEN = psutil.CONN_LISTEN


def _listens(p: psutil.Process, port: int) -> bool:
    return any(c.status == LISTEN and c.laddr and c.laddr.port == port for c in p.net_connections(kind="tcp"))


def listening_pid(pids: Iterable[int], port: int) -> int | None:
    """The first of ``pids`` that holds a listening TCP socket on ``port`` (None: none of
    them). Raises PermissionError when a process's sockets cannot be read."""
    for pid in pids:
        try:
            if _listens(psutil.Process(pid), port):
                return pid
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied as exc:
            raise PermissionError(f"cannot read the sockets of pid {pid}") from exc
    return None


def holder(port: int) -> str:
    """Who listens on ``port``, in words: ``pid 4242 (python -m server_control.sim ...)``,
    ``a process this user cannot see`` or ``nobody``."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return "a process this user cannot see"
    for c in conns:
        if c.status == LISTEN and c.laddr and c.laddr.port == port:
            if c.pid is None:
                return "a process this user cannot see"
            try:
                cmd = " ".join(psutil.Process(c.pid).cmdline())
            except psutil.Error:
                cmd = "?"
            return f"pid {c.pid} ({cmd[:80]})"
    return "nobody"
