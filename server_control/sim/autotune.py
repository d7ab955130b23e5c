"""The simulator's self-tuning threshold (``--sim-auto-tune LO-HI``), decided once.

A thread of the main process reads the scheduler's cost curves every second of simulated
time and gives them to ``protocol.tuner.Tuner``; a move goes through the scheduler's
settings queue as a runtime change does (``apply_setting``), so every TP rank applies it
at the same step, and is logged once with its evidence:
    Dynamic speculation: threshold 8 -> 10 (auto: target-only faster from batch 10, ...)
A threshold set through ``/set_internal_state`` (the operator) turns tuning off, logged
``Dynamic speculation: auto-tune off (threshold set to N by the operator)``; the key
``speculative_disable_auto_tune`` (1 on, 0 off) turns it on or off again.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, Protocol

from server_control.protocol import cost_curves, decision
from server_control.protocol.tuner import AUTO_TUNE_KEY, OPERATOR_OFF, Tuner, TuneSettings

if TYPE_CHECKING:
    from server_control.protocol.explore import Explorer
    from server_control.sim.logfmt import Logger
    from server_control.sim.requests import SimClock

__all__ = ["AUTO_TUNE_KEY", "AutoTune"]
AUTO = "auto"  # the origin of the tuner's own changes


class TunedScheduler(Protocol):
    """What the tuner uses of the scheduler (scheduler.py): its curves and switch under its
    lock, its simulated clock, and its settings queue."""

    clock: SimClock
    cond: threading.Condition
    curves: cost_curves.CostCounters | None
    switch: decision.SpecSwitch | None
    explorer: Explorer
    ready: bool
    log: Logger

    @property
    def vnow(self) -> float: ...

    def apply_setting(self, key: str, value: object, origin: str = ...) -> concurrent.futures.Future[Any]: ...


class AutoTune:
    def __init__(self, sched: TunedScheduler, settings: TuneSettings) -> None:
        self.sched = sched
        self.tuner = Tuner(settings)
        self._stop = threading.Event()
        self._lines: dict[int, str] = {}  # a queued move's log line, by its new N
        self._thread = threading.Thread(target=self._run, name="sim-autotune", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        sched = self.sched
        while not self._stop.wait(1.0 / sched.clock.scale):
            with sched.cond:
                if sched.curves is None or sched.switch is None or not sched.ready:
                    continue
                raw = sched.curves.snapshot()
                threshold, now = sched.switch.threshold, sched.vnow
                exploring = sched.explorer.share > 0
            move = self.tuner.observe(now, cost_curves.parse(raw), threshold, exploring)
            if move is not None:
                with sched.cond:
                    self._lines[move.new] = move.line
                sched.apply_setting(decision.THRESHOLD_KEY, move.new, origin=AUTO)

    def on_setting(self, key: str, value: Any, origin: str) -> tuple[bool, str] | None:
        """The auto-tune key itself: (applied, text); None for any other key. The tuner's own
        threshold move is logged here, as the scheduler applies it, or dropped when the
        operator turned tuning off after the move was decided (the operator's N wins)."""
        if key == decision.THRESHOLD_KEY and origin == AUTO:
            line = self._lines.pop(value, None) if isinstance(value, int) else None
            if not self.tuner.on:
                return False, f"Dynamic speculation: auto-tune move to {value} dropped ({self.tuner.off_reason})"
            if line:
                self.sched.log.info(line)
            return None
        if key != AUTO_TUNE_KEY:
            return None
        if value in (1, 1.0, True):
            self.tuner.turn_on()
            return True, "Dynamic speculation: auto-tune on"
        if value in (0, 0.0, False):
            self.tuner.off("turned off through /set_internal_state")
            return True, "Dynamic speculation: auto-tune off (asked)"
        return False, f"Dynamic speculation: refused {key}={value}: 1 (on) or 0 (off)"

    def applied(self, key: str, value: Any, origin: str) -> str | None:
        """After a setting was applied: an operator's threshold turns tuning off (the line)."""
        if key == decision.THRESHOLD_KEY and origin != AUTO and self.tuner.on:
            self.tuner.off(f"threshold set to {value} by the operator")
            return OPERATOR_OFF.format(value)
        return None

    def snapshot(self) -> dict[str, Any]:
        return self.tuner.snapshot()
