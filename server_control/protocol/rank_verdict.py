"""Every tensor-parallel rank of a DP group: the start-up verdict and the live values.

* ``judge`` / ``Verdict``: TP0's verdict over every rank's start-up facts (the SGLang patch
  exchanges them between ranks; the simulator judges its own ranks with the same words).
  Unless every rank is active with the same settings and versions, every rank turns the
  switch off with the same reason.
* ``internal_states[i]["dynamic_speculation"]["ranks"]``: one live entry per TP rank of DP
  group ``i`` (``live_entry``); clients compare them (``disagreement``, ``values_by_rank``).
Shared by the patch, the simulator and the clients. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server_control.protocol import decision, runtime_settings


def live_keys() -> tuple[str, ...]:
    """A rank's live row: active, every runtime setting (protocol/runtime_settings.py), the mode..."""
    return ("active", *(s.field for s in runtime_settings.SETTINGS), "mode", "num_steps", "switch_count", "last_batch")


def compared() -> tuple[str, ...]:
    """What every rank's live row must agree on. Exploration (protocol/explore.py): its share
    and explored step count, from step numbers, batches and N only, so equal on every rank."""
    return ("active", *(s.field for s in runtime_settings.SETTINGS), "mode", "exploration")


# also gathered when a rank has them: the steps=0 state's memory on the rank (GiB, see
# the patch's startup.py), its graph / eager forward counts per mode, exploration, and the
# in-server tuner's state (sglang_patch/autotune.py: on, off_reason, the moves it applied)
EXTRA_LIVE_KEYS = ("state_memory", "forwards", "exploration", "auto_tune")
AUTO_TUNE_ROW = ("on", "off_reason", "moves")  # of auto_tune, in a rank's row


def live_entry(rank: int, snapshot: dict[str, Any]) -> dict[str, Any]:
    """One rank's entry from its snapshot (``SpecSwitch.snapshot()`` + active, num_steps)."""
    entry = {key: snapshot.get(key) for key in live_keys()}
    entry["rank"] = rank
    entry["active"] = bool(snapshot.get("active", True))
    return entry


def disagreement(rows: list[Any]) -> str | None:
    """Which ranks hold other settings or another mode than TP0, or None."""
    rows = [r for r in rows if isinstance(r, dict)]
    if len(rows) < 2:
        return None
    first = rows[0]
    parts = []
    if "failed" in first:
        return f"TP{first.get('rank')} {first['failed']}"
    for row in rows[1:]:
        if "failed" in row:
            parts.append(f"TP{row.get('rank')} {row['failed']}")
            continue
        keys = [k for k in compared() if row.get(k) != first.get(k)]
        if keys:
            parts.append(
                f"TP{row.get('rank')} "
                + ", ".join(f"{k}={row.get(k)}" for k in keys)
                + " (TP0: "
                + ", ".join(f"{k}={first.get(k)}" for k in keys)
                + ")"
            )
    return "; ".join(parts) or None


@dataclass(frozen=True)
class Verdict:
    agreed: bool  # every rank active, same settings and versions: the switch may run
    reason: str | None  # why not, the same text on every rank
    uniform: bool  # every rank answered, same versions, plain set-up: per-rank gathers are safe
    ranks: tuple[Any, ...] = ()  # per rank: {"active", "reason"} or None (no answer)

    def summary(self) -> list[Any]:
        return [dict(r, rank=i) if r else {"rank": i, "active": False, "reason": "no answer"} for i, r in enumerate(self.ranks)]

    def to_json(self) -> str:
        return json.dumps({"agreed": self.agreed, "reason": self.reason, "uniform": self.uniform, "ranks": list(self.ranks)})

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        raw = json.loads(text)
        return cls(bool(raw["agreed"]), raw.get("reason"), bool(raw.get("uniform")), tuple(raw.get("ranks") or ()))


def _names(indices: Sequence[int]) -> str:
    return ", ".join(f"TP{i}" for i in indices)


def _differ(got: list[dict[str, Any]], key: str) -> str | None:
    values = [g[key] for g in got]
    if all(v == values[0] for v in values):
        return None
    return "; ".join(f"TP{i} {v}" for i, v in enumerate(values))


def _rank_summary(got: dict[str, Any]) -> dict[str, Any]:
    out = {"active": got["active"], "reason": got["reason"]}
    if isinstance(got.get("memory"), dict):
        out["memory"] = got["memory"]  # free memory and the steps=0 estimate, before the build
    return out


def judge(got: Sequence[dict[str, Any] | None], timeout_s: float) -> Verdict:
    """Rank 0's verdict over every rank's facts (None: no answer within the timeout)."""
    per_rank = tuple(_rank_summary(g) if g else None for g in got)
    off = "; the switch is off on every rank"
    # per-rank gathers need every rank answering, on this patch, in a plain set-up (no
    # attention DP, no PP: there the TP ranks do not all handle each request in step)
    setups = all(g is None or g.get("setup_ok", True) for g in got)
    missing = [i for i, g in enumerate(got) if g is None]
    if missing:
        return Verdict(
            False,
            f"{_names(missing)} did not report to TP0 within {timeout_s:.0f} s "
            "(no patch there, another version of it or of sglang, or the rank failed "
            "before its speculative worker was ready)" + off,
            False,
            per_rank,
        )
    facts = [g for g in got if g is not None]  # every rank answered
    for key, what in (("patch", "different versions of the patch"), ("sglang", "different sglang versions")):
        diff = _differ(facts, key)
        if diff is not None:
            return Verdict(False, f"TP ranks run {what} ({diff})" + off, False, per_rank)
    diff = _differ(facts, "settings")
    if diff is not None:
        return Verdict(
            False,
            f"TP ranks were started with different settings [{', '.join(s.word for s in runtime_settings.SETTINGS)}] ({diff})"
            + off,
            setups,
            per_rank,
        )
    inactive = [i for i, g in enumerate(facts) if not g["active"]]
    if not inactive:
        return Verdict(True, None, setups, per_rank)
    reasons = {facts[i]["reason"] for i in inactive}
    if len(inactive) == len(facts) and len(reasons) == 1:
        return Verdict(False, reasons.pop(), setups, per_rank)  # the same refusal everywhere
    why = "; ".join(f"TP{i}: {facts[i]['reason']}" for i in inactive)
    ready = [i for i, g in enumerate(facts) if g["active"]]
    return Verdict(False, f"TP ranks disagree: {why}; ready: {_names(ready) or 'none'}" + off, setups, per_rank)


def readable(field: str | None, value: object, who: str = "") -> object:
    """``value`` as read, or ``<unreadable: ...>`` naming the rank and what is wrong when an
    integer setting is not an integer (JSON's ``Infinity``, ``NaN``, ``7.5``, ``true``, a
    string): never compared as if another client had set it."""
    integer = any(s.field == field and s.kind is int for s in runtime_settings.SETTINGS)
    if not integer or value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    try:
        shown = json.dumps(value)
    except (TypeError, ValueError):
        shown = repr(value)
    return f"<unreadable: {who + ' ' if who else ''}{field} is {shown[:40]}, not an integer>"


def values_by_rank(state: dict[str, Any], key: str) -> list[tuple[str, object]]:
    """(rank label, value of ``key``) for every TP rank an ``internal_states`` entry covers:
    each gathered rank where the patch published them, else the entry's own (TP0's) value."""
    if not isinstance(state, dict):
        return [("", f"<unreadable: the entry is a {type(state).__name__}, not an object>")]
    dyn = state.get(decision.STATE_KEY)
    if dyn is not None and not isinstance(dyn, dict):  # a broken server: say what, never raise
        return [("", f"<unreadable: {decision.STATE_KEY} is a {type(dyn).__name__}, not an object>")]
    rows = (dyn or {}).get("ranks")
    setting = runtime_settings.by_key(key)
    field = setting.field if setting is not None else None
    if isinstance(rows, list) and rows and field is not None:
        out = []
        for r in rows:
            if isinstance(r, dict):
                who = f"TP{r.get('rank')}"
                out.append((who, readable(field, r.get(field), who)))
        return out
    return [("", readable(field, state.get(key)))]
