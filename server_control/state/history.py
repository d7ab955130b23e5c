"""The compact history of one profile's server in the state dir, so a new console (or one
after a restart of the server) starts its charts with what the last one recorded.

One file per profile, ``<state dir>/history/<profile>.jsonl``, mode 0600, rewritten
atomically (server_control/state/private_files.py) at most every ``WRITE_EVERY_S``: one
JSON object a line (``HistPoint``). Resolution falls with age (``compact``): every sample
for the last ``RAW_S``, 10 s buckets up to an hour, 1 min buckets up to ``HORIZON_S``
(6 h), nothing older; at most ``MAX_POINTS`` lines of at most ``LINE_BYTES`` (``MAX_BYTES``, 170 KiB).
A bucket keeps the mean batch, tok/s and accept length, the last N and run, the mode most
of its samples were in (1 target-only on a tie) and ``up`` only if every sample answered,
so an outage survives downsampling. Reading is tolerant (``read_history``): a line that
does not parse, or holds no finite time, is skipped and counted, never fatal.
One process writes a profile's file at a time (server_control/state/history_writer.py): a
second console on that profile keeps its points in memory (``written_by``: the writer's pid)
until the writer has gone, then adds its newer points to what the file holds.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from server_control.state.history_writer import HistoryWriter
from server_control.state.private_files import atomic_write
from server_control.state.state_dir import StateDirError, private_dir

RAW_S = 300.0  # full resolution for the last five minutes
TIERS = ((3600.0, 10.0), (6 * 3600.0, 60.0))  # (up to this age, bucket seconds)
HORIZON_S = TIERS[-1][0]
MAX_RAW = 600  # samples kept at full resolution (a 0.5 s poll fills five minutes)
MAX_POINTS = MAX_RAW + 330 + 300 + 10  # raw + 10 s buckets of 55 min + 1 min buckets of 5 h
LINE_BYTES = 140  # the longest line: every field present, a run id of RUN_CHARS
MAX_BYTES = MAX_POINTS * LINE_BYTES
MAX_READ_BYTES = 4 * MAX_BYTES  # a file grown by hand past this is read only up to it
WRITE_EVERY_S = 15.0
RUN_CHARS = 40  # a run's start time, ISO with microseconds and zone: 32


@dataclass(frozen=True)
class HistPoint:
    ts: float  # epoch seconds (a bucket: its start)
    batch: float | None = None
    tok_s: float | None = None
    accept: float | None = None
    n: int | None = None  # the threshold N
    mode: int | None = None  # 0 speculative, 1 target-only
    up: bool = True  # the server answered (a bucket: every sample did)
    run: str = ""  # the run it belongs to (its start time): a change marks a restart
    step: float = 0.0  # bucket seconds (0: one sample)

    def to_line(self) -> str:
        raw = {
            "ts": round(self.ts, 3),
            "b": _r(self.batch, 2),
            "t": _r(self.tok_s, 1),
            "a": _r(self.accept, 3),
            "n": self.n,
            "m": self.mode,
            "u": int(self.up),
            "r": self.run[:RUN_CHARS],
            "s": self.step,
        }
        return json.dumps({k: v for k, v in raw.items() if v is not None}, separators=(",", ":"))

    @classmethod
    def from_line(cls, line: str) -> HistPoint:
        """Raises ValueError (or TypeError/KeyError) on anything that is not a point."""
        raw = json.loads(line)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        ts = _finite(raw["ts"])
        if ts is None:
            raise ValueError("no time")
        n, mode = raw.get("n"), raw.get("m")
        return cls(
            ts,
            _finite(raw.get("b")),
            _finite(raw.get("t")),
            _finite(raw.get("a")),
            int(n) if isinstance(n, int) and not isinstance(n, bool) else None,
            mode if mode in (0, 1) else None,
            bool(raw.get("u", 1)),
            str(raw.get("r", ""))[:RUN_CHARS],
            _finite(raw.get("s")) or 0.0,
        )


def _r(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def _finite(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _mean(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return sum(vs) / len(vs) if vs else None


def merge(points: list[HistPoint], start: float, step: float) -> HistPoint:
    """One bucket of ``step`` seconds at ``start`` from the points in it (oldest first)."""
    modes = [p.mode for p in points if p.mode is not None]
    mode = None if not modes else int(2 * sum(modes) >= len(modes))
    return HistPoint(
        start,
        _mean(p.batch for p in points),
        _mean(p.tok_s for p in points),
        _mean(p.accept for p in points),
        next((p.n for p in reversed(points) if p.n is not None), None),
        mode,
        all(p.up for p in points),
        points[-1].run,
        step,
    )


def bucket(points: list[HistPoint], step: float) -> list[HistPoint]:
    """Points (oldest first) merged into buckets of ``step`` seconds aligned to the epoch;
    points already that coarse pass as they are. A run change starts a new bucket, so a
    restart is never averaged away."""
    out: list[HistPoint] = []
    group: list[HistPoint] = []
    key: tuple[float, str] | None = None
    for p in points:
        if p.step >= step:
            if group:
                out.append(merge(group, key[0] if key else p.ts, step))
                group, key = [], None
            out.append(p)
            continue
        k = (math.floor(p.ts / step) * step, p.run)
        if key is not None and k != key:
            out.append(merge(group, key[0], step))
            group = []
        group.append(p)
        key = k
    if group and key is not None:
        out.append(merge(group, key[0], step))
    return out


def compact(points: list[HistPoint], now: float) -> list[HistPoint]:
    """The points to keep at ``now``: full resolution for ``RAW_S``, then coarser by tier,
    nothing past ``HORIZON_S``; oldest first, at most ``MAX_POINTS``."""
    points = sorted((p for p in points if now - p.ts <= HORIZON_S), key=lambda p: p.ts)
    raw = [p for p in points if now - p.ts <= RAW_S][-MAX_RAW:]
    kept: list[HistPoint] = []
    younger = RAW_S
    for older, step in TIERS:
        tier = [p for p in points if younger < now - p.ts <= older]
        kept = bucket(tier, step) + kept
        younger = older
    # The tiers' order is oldest last in the loop: put them oldest first.
    kept.sort(key=lambda p: p.ts)
    return (kept + raw)[-MAX_POINTS:]


def read_history(path: str | Path) -> tuple[list[HistPoint], int]:
    """The points in ``path`` (oldest first) and how many lines were skipped; no file: none."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_READ_BYTES)
    except FileNotFoundError:
        return [], 0
    except OSError:
        return [], 1
    points: list[HistPoint] = []
    bad = 0
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            points.append(HistPoint.from_line(line))
        except (ValueError, TypeError, KeyError):
            bad += 1
    points.sort(key=lambda p: p.ts)
    return points, bad


def history_path(state_dir: str | Path, profile: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in profile) or "_"
    return Path(state_dir) / "history" / f"{safe}.jsonl"


@dataclass(frozen=True)
class Recorded:
    """A profile's history as a session hands it out: the points, oldest first, and the
    newest of them that was read from the file (what an earlier session recorded)."""

    points: tuple[HistPoint, ...] = ()
    until: float | None = None


class History:
    """One profile's history: the points read at start, those added since, written back at
    most every ``WRITE_EVERY_S`` (``maybe_write``) and on ``write()``."""

    def __init__(self, path: str | Path | None, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path) if path is not None else None
        self.clock = clock
        self.points: list[HistPoint] = []
        self.bad = 0  # lines of the file that were skipped
        self.loaded_until: float | None = None  # the newest point read from the file
        self.error: str | None = None  # why the last write failed
        self._written_at = clock()
        self.writer = HistoryWriter(self.path) if self.path is not None else None
        if self.path is not None:
            self._take()
            self.points, self.bad = read_history(self.path)
            self.points = compact(self.points, clock())
            self.loaded_until = self.points[-1].ts if self.points else None

    def add(self, point: HistPoint) -> None:
        if self.points and point.ts < self.points[-1].ts:
            return  # a clock step back: keep the file in order
        self.points.append(point)
        if len(self.points) > 2 * MAX_POINTS:
            self.points = compact(self.points, point.ts)

    def maybe_write(self) -> bool:
        if self.clock() - self._written_at < WRITE_EVERY_S:
            return False
        return self.write()

    @property
    def written_by(self) -> int | None:
        """The pid of the process that writes the file when it is not this one (None: this
        one, or nobody holds the writer's lock now)."""
        if self.writer is None or self.writer.held or not self.writer.lock.is_held_elsewhere():
            return None
        return self.writer.holder()

    def _take(self) -> bool:
        """The writer's lock (StateDirError/OSError are the write's to say: False here)."""
        assert self.writer is not None
        try:
            return self.writer.take()
        except (StateDirError, OSError):
            return False

    def _join_file(self) -> None:
        """Just became the writer: the file holds what the last writer recorded meanwhile;
        keep it and add the points of ours that are newer than its newest."""
        assert self.path is not None
        theirs, _bad = read_history(self.path)
        if theirs:
            self.points = theirs + [p for p in self.points if p.ts > theirs[-1].ts]

    def release(self) -> None:
        """Stop being the writer (on close; the kernel releases it when the process ends)."""
        if self.writer is not None:
            self.writer.release()

    def write(self) -> bool:
        """Write the file if this process is its writer (or can become it); False if not
        written (``error`` says why, None when another process writes it)."""
        now = self.clock()
        self._written_at = now
        self.points = compact(self.points, now)
        if self.path is None or self.writer is None:
            return False
        try:
            private_dir(self.path.parent)  # 0700; refused when others could write there
            if not self.writer.held:
                if not self.writer.take():
                    self.error = None  # another console writes it: ours stay in memory
                    return False
                self._join_file()
                self.points = compact(self.points, now)
            body = "".join(p.to_line() + "\n" for p in self.points)
            atomic_write(self.path, body)
        except StateDirError as exc:
            self.error = f"history not saved: {exc}"
            return False
        except OSError as exc:
            self.error = f"history not saved to {self.path}: {exc.strerror or exc}"
            return False
        self.error = None
        return True

    def snapshot(self) -> Recorded:
        return Recorded(tuple(self.points), self.loaded_until)
