"""Run records made by tests."""

from __future__ import annotations

import os

import psutil

from server_control.host.start_ticks import proc_start
from server_control.state import runs


def own_record(**kw) -> runs.RunRecord:
    """A record of this test process, as the current version writes it (with its start
    ticks: server_control/host/start_ticks.py); ``boot_id=None, start_ticks=None`` for an old one."""
    me = psutil.Process()
    start = proc_start(me.pid)
    base = dict(
        name="r",
        profile_path=None,
        kind="sim",
        pid=me.pid,
        create_time=me.create_time(),
        boot_id=start.boot_id,
        start_ticks=start.ticks,
        pgid=os.getpgid(0),
        sid=os.getsid(0),
        argv=me.cmdline(),
        host="127.0.0.1",
        port=1,
        log_path="/nonexistent.log",
        cwd="/",
        started_at="2026-01-01T00:00:00+00:00",
    )
    base.update(kw)
    return runs.RunRecord(**base)
