"""A state filesystem gone read-only (ext4 remounts so after I/O errors; trust round 4 item
1): ``stop`` died with a traceback opening its lock for writing, before any signal, and the
server kept running. Now the lock is taken on a read-only descriptor, the record's
"stopping" mark fails and is said, and the server is stopped. EROFS is injected at every
open for writing under the state dir (no read-only mount can be made here)."""

from __future__ import annotations

import errno
import os

from server_control.config.profile import load_profile
from server_control.host import identity
from server_control.supervision.supervisor import Supervisor

_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def make_read_only(state_dir, monkeypatch) -> None:
    """EROFS at every open for writing under ``state_dir`` (``monkeypatch.undo()`` ends it)."""
    real_open = os.open

    def read_only(path, flags, *args, **kw):
        if str(path).startswith(str(state_dir)) and flags & _WRITE:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", read_only)


async def test_stop_on_a_read_only_state_dir_signals_and_says_what_it_could_not_write(
    make_profile, state_dir, groups, monkeypatch
):
    profile = load_profile(make_profile("ro", tp=1, grace=2.0))
    rec = await Supervisor(profile).launch()
    groups.add(rec.pgid)
    make_read_only(state_dir, monkeypatch)
    sup = Supervisor(profile)
    sup.adopt()
    res = await sup.stop()
    monkeypatch.undo()
    assert identity.run_processes(rec.identity()) == [], res.message
    assert res.was_running and "could not" in res.message and "Read-only file system" in res.message, res.message


async def test_supervise_on_a_read_only_state_dir_says_it_cannot_take_the_restart_lock(
    make_profile, state_dir, groups, monkeypatch
):
    """`supervise` on a read-only state dir said "supervising" (it took the lock through a
    read-only descriptor) and then failed every restart with EROFS: it cannot launch there.
    It says instead that it cannot take the restart lock, and why, and watches only; the
    lock is taken again once the filesystem is writable."""
    from console.cli.supervise_words import role_line

    profile = load_profile(make_profile("rosup", tp=1, grace=2.0))
    rec = await Supervisor(profile).launch()
    groups.add(rec.pgid)
    make_read_only(state_dir, monkeypatch)
    sup = Supervisor(profile, role="supervise")
    sup.adopt()
    sup.ownership.try_lock()
    line = role_line(sup)
    monkeypatch.undo()
    assert not sup.supervising
    assert "cannot take the restart lock" in line and "read-only" in line and str(state_dir) in line, line
    assert "another process" not in line and "supervises this run" not in line, line
    sup.ownership.try_lock()  # writable again: it supervises
    assert sup.supervising and sup.ownership.cannot_lock is None
    sup.ownership.unlock()
    await sup.stop()
    assert identity.run_processes(rec.identity()) == []
