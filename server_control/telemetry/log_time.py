"""A log record's own time as epoch seconds: what switch rates are measured on, so that
every observer (a console up for hours, a fresh one, `specconsole status`) counts the same
switches in the same window, whenever it started reading the log.

SGLang writes local wall-clock time (``2026-11-29 10:00:00[.123]``, or ``10:00:00`` in
some formats); ``Record.ts`` gives it as ``2026-11-29T10:00:00[.123]`` or ``10:00:00``.
"""

from __future__ import annotations

import datetime as _dt

DAY_S = 86_400.0
FUTURE_SLACK_S = 60.0


def record_epoch(ts: object, now: float) -> float | None:
    """Epoch seconds of a record's ``ts`` (local time), or None when it has none or it does
    not parse. A time without a date is taken as today's, or yesterday's when today's would
    lie ahead of ``now``."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        if "T" in ts or "-" in ts:
            return _dt.datetime.fromisoformat(ts.replace(",", ".")).timestamp()
        t = _dt.time.fromisoformat(ts.replace(",", "."))
    except ValueError:
        return None
    today = _dt.datetime.fromtimestamp(now).date()
    epoch = _dt.datetime.combine(today, t).timestamp()
    return epoch - DAY_S if epoch > now + FUTURE_SLACK_S else epoch
