"""What a session keeps from its server's log records beyond the store: the lines the
verification reads (``Dynamic speculation`` init, NOT active, ready), the time of the log's
first record, and the changes of N / hysteresis / dwell that begin a new switch-rate regime.
Switch and init records also go to the mode timeline. One ``LogFacts`` per followed log:
``reset()`` when a new run's log begins."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from server_control.logs import Record
from server_control.logs import record as kinds
from server_control.protocol import decision, runtime_settings
from server_control.telemetry.log_time import record_epoch
from server_control.telemetry.series import ModeTimeline

KEEP_INIT_RECORDS = 512


def damping_changes() -> tuple[str, ...]:
    """The log lines of a change of a setting that damps the rule: a new regime for the switch rate."""
    return tuple(s.change_prefix for s in runtime_settings.SETTINGS if s.damps)


class LogFacts:
    def __init__(self) -> None:
        self.init: list[Record] = []
        self.not_active: list[Record] = []
        self.ready: list[Record] = []
        self.began: float | None = None  # the time stamp of this log's first record
        self.seen_seq = 0  # the store's records up to here are scanned

    def reset(self) -> None:
        """A new run's log begins (the store's sequence goes on)."""
        self.init.clear()
        self.not_active.clear()
        self.ready.clear()
        self.began = None

    def scan(
        self, records: Iterable[Record], last_seq: int, now: float, timeline: ModeTimeline, on_damping: Callable[[float], None]
    ) -> None:
        """Take in the store's records since ``seen_seq`` (up to ``last_seq``)."""
        for rec in records:
            kind = rec.kind
            if self.began is None and kind != kinds.CONSOLE:
                self.began = record_epoch(rec.ts, now)
            if kind == kinds.OTHER and rec.text.startswith(damping_changes()):
                on_damping(record_epoch(rec.ts, now) or now)
            elif kind in (kinds.SPEC_SWITCH, kinds.SPEC_INIT):
                timeline.add_record(rec, now)
                if kind == kinds.SPEC_INIT and len(self.init) < KEEP_INIT_RECORDS:
                    self.init.append(rec)
            elif kind == kinds.READY:
                self.ready.append(rec)
                del self.ready[:-4]
            elif kind == kinds.ERROR and decision.NOT_ACTIVE_PREFIX in rec.text:
                self.not_active.append(rec)
                del self.not_active[:-8]
        self.seen_seq = last_seq
