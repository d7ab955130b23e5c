"""What a session records of its server in the profile's history (server_control/state/history.py):
one point per poll (batch, tok/s, accept length, N, mode; ``up`` False while the server does
not answer or is not this run's), the run it belongs to (its start time and pid: a change marks a
restart), written at a low rate and when the session closes. An attached session (no
profile) keeps its points in memory only, and so does a second console on a profile whose
history another console writes (it says "written by pid N")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from server_control.config.profile import Profile
from server_control.model.run_status import RunStatus
from server_control.protocol import decision
from server_control.session.run_backends import RunLike
from server_control.state.history import History, HistPoint, Recorded, history_path
from server_control.telemetry.sample import Sample


def run_id_of(run: RunStatus) -> str:
    """The run a point belongs to: its start time and its pid (a start time has whole
    seconds only, and a restart can fall in the same second as the start it replaces)."""
    started = run.started_at or ""
    return f"{started}#{run.pid}" if run.pid is not None else started


def point_of(sample: Sample, run: RunStatus, foreign: bool = False) -> HistPoint:
    run_id = run_id_of(run)
    if not sample.reachable or foreign:
        return HistPoint(sample.ts, up=False, run=run_id)
    load = sample.load
    return HistPoint(
        sample.ts,
        load.batch,
        load.gen_throughput,
        load.accept_len,
        sample.threshold,
        None if sample.mode is None else int(sample.mode == decision.TARGET_ONLY),
        True,
        run_id,
    )


class HistoryKeeper:
    def __init__(self, state_dir: str | Path | None, profile: str | None, say: Callable[[str], None] = lambda _: None) -> None:
        self.history = History(history_path(state_dir, profile) if state_dir is not None and profile else None)
        self.say = say  # a failed write, once until a write succeeds (the log view's console line)
        self._said: str | None = None
        if self.history.bad:
            say(f"history {self.history.path}: {self.history.bad} unreadable line(s) skipped")
        writer = self.history.written_by
        if writer is not None:
            say(f"history {self.history.path}: written by pid {writer}; this console keeps its points in memory")

    @classmethod
    def of(cls, run: RunLike, profile: Profile | None, say: Callable[[str], None]) -> HistoryKeeper:
        """The keeper of a session's run: the profile's file in the run's ``history_dir()``
        (None, an attached run or a headless command: memory only)."""
        return cls(run.history_dir(), profile.name if profile is not None else None, say)

    def observe(self, sample: Sample, run: RunStatus, foreign: bool) -> None:
        self.history.add(point_of(sample, run, foreign))
        if self.history.maybe_write() or self.history.error is None:
            self._said = None
        elif self.history.error != self._said:
            self._said = self.history.error
            self.say(self.history.error)

    def close(self) -> None:
        self.history.write()
        self.history.release()

    def recorded(self) -> Recorded:
        return self.history.snapshot()
