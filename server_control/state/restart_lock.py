"""The restart lock of a run: ``<state dir>/runs/<name>.lock``, flock'ed by the one process
that restarts the run's crashes (its supervisor); the kernel releases it when that process
dies, however it dies. Not taken on a read-only state filesystem (``ReadOnlyState``): no
restart could be launched there."""

from __future__ import annotations

from pathlib import Path

from server_control.state.private_files import FileLock
from server_control.state.runs import runs_dir


class ReadOnlyState(Exception):
    """The state directory is read-only: no restart could write its run record or log."""


class RestartLock:
    """``runs/<name>.lock``, flock'ed by the one process that restarts crashes of a run.
    The kernel releases it when that process dies, however it dies."""

    @staticmethod
    def acquire(name: str, state_dir: str | Path | None = None) -> FileLock | None:
        """The lock, or None when another process holds it. Raises ReadOnlyState on a read-only
        state filesystem: a lock taken there would promise restarts that cannot be launched."""
        lock = FileLock(runs_dir(state_dir) / f"{name}.lock", f"the restart lock of profile {name!r}")
        if not lock.try_acquire():
            return None
        if lock.read_only:
            lock.release()
            raise ReadOnlyState(
                f"cannot take the restart lock: the state directory {runs_dir(state_dir).parent} is read-only "
                "(a restart could not write its run record, note or log there)"
            )
        return lock

    @staticmethod
    def held_elsewhere(name: str, state_dir: str | Path | None = None) -> bool:
        return FileLock(runs_dir(state_dir) / f"{name}.lock").is_held_elsewhere()
