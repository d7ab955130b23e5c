"""Cost curves kept in the state dir, so the next console starts with what this one learnt.

``<state dir>/advice/<key>.json`` per server (key: a hash of its URL, or of the name a
``CurvesHome`` gives it, e.g. a fleet member's, whose URL is a tunnel's port that changes
from run to run; a reading from another model there starts the curves afresh, since its
costs are another's):
``{"version": 1, "url", "model", "saved_at", "first_seen", "base": curves, "last": curves}``.
The server's counters are cumulative over its life; ``last`` is its latest reading and
``base`` what earlier lives of the server counted (when a reading has fewer steps than
``last``, the server restarted: ``last`` is folded into ``base``). ``total()`` is both.
A file that does not parse is reported with its path and left in place (nothing lost);
the store then starts afresh in memory and writes a new file beside it only after
renaming the bad one to ``*.bad``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server_control.protocol.cost_curves import Bucket, Curves, CurvesError, parse
from server_control.state.private_files import atomic_write
from server_control.state.state_dir import resolve_state_dir

VERSION = 1
MAX_BYTES = 1 << 20


class StoreError(ValueError):
    pass


@dataclass(frozen=True)
class CurvesHome:
    """Where a server's curves are kept: a state dir, and the name they are kept under
    (its URL, unless the URL does not name the server for long)."""

    state_dir: Path
    key: str


def _to_json(c: Curves) -> dict[str, Any]:
    modes: dict[str, list[list[Any]]] = {}
    for b in c.buckets:
        modes.setdefault(b.mode, []).append(
            [b.lo, b.hi, b.steps, b.seconds, b.seconds_sq, b.batch_sum, b.verified, b.tokens, b.tokens_sq, b.context_sum]
        )
    return {"cap": c.cap, "dropped": c.dropped, "modes": modes}


def add(a: Curves, b: Curves) -> Curves:
    """Two sets of counters summed bucket by bucket."""
    out: dict[tuple[str, int, int], Bucket] = {(x.mode, x.lo, x.hi): x for x in a.buckets}
    for y in b.buckets:
        key = (y.mode, y.lo, y.hi)
        x = out.get(key)
        if x is None:
            out[key] = y
            continue
        ctx = None if x.context_sum is None or y.context_sum is None else x.context_sum + y.context_sum
        out[key] = Bucket(
            y.mode,
            y.lo,
            y.hi,
            x.steps + y.steps,
            x.seconds + y.seconds,
            x.seconds_sq + y.seconds_sq,
            x.batch_sum + y.batch_sum,
            x.verified + y.verified,
            x.tokens + y.tokens,
            x.tokens_sq + y.tokens_sq,
            ctx,
        )
    return Curves(b.cap, a.dropped + b.dropped, tuple(out[k] for k in sorted(out)))


def _restarted(last: Curves, now: Curves) -> bool:
    before = {(b.mode, b.lo, b.hi): b.steps for b in last.buckets}
    return any(b.steps < before.get((b.mode, b.lo, b.hi), 0) for b in now.buckets) or (
        sum(b.steps for b in now.buckets) < sum(before.values())
    )


EMPTY = Curves(32, 0, ())


@dataclass(frozen=True)
class Saved:
    url: str
    model: str | None
    saved_at: float
    first_seen: float
    base: Curves
    last: Curves

    def total(self) -> Curves:
        return add(self.base, self.last)

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.saved_at)


def path_for(url: str, model: str | None, state_dir: str | Path | None = None, key: str | None = None) -> Path:
    """The file of the server kept under ``key`` (its ``url`` when None)."""
    digest = hashlib.sha256((url if key is None else key).encode()).hexdigest()[:16]
    return resolve_state_dir(state_dir) / "advice" / f"{digest}.json"


def load(url: str, model: str | None, state_dir: str | Path | None = None, key: str | None = None) -> Saved | None:
    """The saved curves of this server, None if none; StoreError naming the file if bad."""
    path = path_for(url, model, state_dir, key)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc}") from None
    if len(raw) > MAX_BYTES:
        raise StoreError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise StoreError(f"{path}: not a version {VERSION} curves file")
        for key in ("saved_at", "first_seen"):
            if not isinstance(doc.get(key), (int, float)) or isinstance(doc.get(key), bool):
                raise StoreError(f"{path}: {key} must be a number")
        return Saved(
            str(doc.get("url")),
            doc.get("model"),
            float(doc["saved_at"]),
            float(doc["first_seen"]),
            parse(doc.get("base")),
            parse(doc.get("last")),
        )
    except (ValueError, CurvesError) as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"{path}: {exc}") from None


def update(
    url: str,
    model: str | None,
    reading: Curves,
    state_dir: str | Path | None = None,
    now: float | None = None,
    key: str | None = None,
) -> Saved:
    """Fold a fresh reading of the server's counters into the saved curves and write them."""
    now = time.time() if now is None else now
    path = path_for(url, model, state_dir, key)
    try:
        saved = load(url, model, state_dir, key)
    except StoreError:
        os.replace(path, path.with_suffix(".json.bad"))  # kept for a look, never lost
        saved = None
    if saved is None or (saved.model and model and saved.model != model):
        saved = Saved(url, model, now, now, EMPTY, EMPTY)
    base = add(saved.base, saved.last) if _restarted(saved.last, reading) else saved.base
    new = Saved(url, model, now, saved.first_seen, base, reading)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(
        path,
        json.dumps(
            {
                "version": VERSION,
                "url": url,
                "model": model,
                "saved_at": now,
                "first_seen": saved.first_seen,
                "base": _to_json(base),
                "last": _to_json(reading),
            }
        ),
    )
    return new
