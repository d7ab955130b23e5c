"""Runtime changes and other clients: a change is only "applied" if the server still shows
the value THIS client set once concurrent changes are over; a change nobody here made is
said ("N changed elsewhere: 5 -> 8, by root@host pid 42 (specconsole threshold)").

``SettingGuard.change(key, requested, action, old)`` journals the change (server_control/
state/journal.py: pending, read back, result), then confirms an applied one: it waits
``SETTLE_S`` (a change another client sends at the same moment lands in that window),
waits for the other clients' changes of the same setting on the same server that are in
flight (their journal entries are pending and not yet read back), and reads the server
again. Another value there -> ``overridden``: "overridden by another client (now N=8, by
...)" (exit 1 in `specconsole threshold`). A client on another host, or curl, has no
entry here: the settle and the second read still catch what it did before that read.

``SettingGuard.elsewhere(sample)``: the settings a poll shows changed since the previous
reachable poll that this session did not set itself, with who did it when the journal
knows; a value re-applied after a restart (journal action ``reapply``: the run carrying its
own runtime settings, whoever supervises it) comes with ``who == REAPPLY``: not news from
another client, and said even when the first poll after the restart already shows it.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil

from server_control.control.server_tune import ServerMove, ServerTuneWatch
from server_control.control.settings import READBACK_TIMEOUT_S, Control, change
from server_control.model.snapshot import SettingChange
from server_control.model.vocabulary import ChangeState
from server_control.protocol import runtime_settings
from server_control.state import journal
from server_control.telemetry.sample import Sample

REAPPLY = "reapply"  # the journal's action for a setting re-applied after a restart (runtime_settings.py)
AUTO_TUNED = "server auto-tune"  # ``elsewhere``'s who for a move of the server's own tuner
SETTLE_S = 0.3
CONFIRM_WAIT_S = READBACK_TIMEOUT_S + 1.0
LOOKBACK_S = 5.0


def shown(sample: Sample) -> dict[str, object]:
    """The settings a poll shows (DP rank 0), by server-argument name."""
    r0 = sample.ranks[0] if sample.ranks else None
    if r0 is None:
        return {}
    return {s.key: r0.settings.get(s.key) for s in runtime_settings.SETTINGS}


class SettingGuard:
    def __init__(self, control: Control, target: str, state_dir: str | Path | None = None, profile: str | None = None) -> None:
        self.control = control
        self.target = target
        self.state_dir = state_dir
        self.profile = profile
        self._mine: dict[str, object] = {}  # the last value this session set, per key
        self._busy: set[str] = set()  # keys this session is changing now
        self._seen: dict[str, object] | None = None  # the settings at the previous reachable poll
        self._last_seen: dict[str, object] | None = None  # the same, kept across a gap (None: no poll yet)
        self._reachable_at: float | None = None  # when a poll last reached the server
        self._reapplied: dict[str, object] = {}  # per key, the re-apply (its op) said last
        self._journal_file: Path | None = None
        self._journal_stamp: tuple[int, int, int] | None = None  # the journal at the last look
        self.server_tune = ServerTuneWatch(target, state_dir, profile)
        self._move: ServerMove | None = None  # the server's own move the last poll showed
        self._journaled: journal.Entry | None = None  # its entry, when another observer journaled it first

    def _record(self, key: str, result: str, **kw: object) -> None:
        word = runtime_settings.named(key).word  # the journal's action: the setting's command-line word
        journal.record(self.state_dir, word, target=self.target, profile=self.profile, key=key, result=result, **kw)

    async def change(
        self, key: str, requested: object, action: Callable[[object], Awaitable[SettingChange]], old: object = None
    ) -> SettingChange:
        op, started, setting = journal.new_op(), time.time(), runtime_settings.named(key)
        try:  # " 5" or "+5" is journaled as the value applied: 5
            shown_new: object = setting.validate(requested)
        except ValueError:
            shown_new = requested
        self._busy.add(key)
        try:
            self._record(key, journal.PENDING, old=old, new=shown_new, op=op)
            result = await action(requested)
            self._record(key, journal.READ_BACK, old=old, new=shown_new, detail=result.state, op=op)
            accepted = result.state == ChangeState.APPLIED or (
                result.state == ChangeState.ERROR and result.ranks and all(result.ranks)
            )
            if accepted:  # the server took it: is it still ours once concurrent changes are over?
                result = await self._confirm(key, setting.validate(requested), requested, old, result, op, started)
            if result.state == ChangeState.APPLIED:
                self._mine[key] = setting.validate(requested)
            self._record(key, result.state, old=old, new=shown_new, detail=result.detail, op=op)
            return result
        finally:
            self._busy.discard(key)

    def _in_flight(self, entries: list[journal.Entry]) -> bool:
        """Another client's change still in flight: only pending steps, written by a process
        that still runs (one of this host killed mid-change is not waited for)."""
        if not all(e.result == journal.PENDING for e in entries):
            return False
        e = entries[-1]
        return e.host != socket.gethostname() or psutil.pid_exists(e.pid)

    def _others(self, key: str, op: str, since: float) -> dict[str, list[journal.Entry]]:
        ops: dict[str, list[journal.Entry]] = defaultdict(list)
        for e in journal.read(self.state_dir, target=self.target, since=since):
            if e.key == key and e.op and e.op != op:
                ops[e.op].append(e)
        return ops

    async def _confirm(
        self, key: str, value: object, requested: object, old: object, result: SettingChange, op: str, started: float
    ) -> SettingChange:
        await asyncio.sleep(SETTLE_S)
        deadline = time.monotonic() + CONFIRM_WAIT_S
        ops: dict[str, list[journal.Entry]] = {}
        while time.monotonic() < deadline:
            ops = self._others(key, op, started - LOOKBACK_S)
            if not any(self._in_flight(es) for es in ops.values()):
                break  # no other client's change of this setting is still in flight
            await asyncio.sleep(0.05)
        try:
            values = await self.control.values(key)
        except Exception:  # noqa: BLE001 - the first read-back stands
            return result
        if values and all(v == value for v in values):
            return change(
                key,
                requested,
                ChangeState.APPLIED,
                result.detail if result.state == ChangeState.APPLIED else f"{key}={value} read back after a concurrent change",
                result.ranks,
            )
        unreadable = any(isinstance(v, str) and v.startswith("<unreadable") for v in values)
        if values and not unreadable and all(v == values[0] for v in values) and (ops or not _same(key, values[0], old)):
            by, label = self._by(key, values[0], op, started - LOOKBACK_S), runtime_settings.named(key).label
            return change(
                key,
                requested,
                ChangeState.OVERRIDDEN,
                f"overridden by another client (now {label}={values[0]}" + (f", by {by}" if by else "") + ")",
                result.ranks,
            )
        return result

    def _last(self, key: str, value: object, op: str | None, since: float) -> journal.Entry | None:
        """The journal entry that set ``key`` to ``value`` last (another op than ``op``)."""
        for e in reversed(journal.read(self.state_dir, target=self.target, since=since)):
            # a re-apply counts while in flight (its result comes after the poll may see the value)
            in_flight_reapply = e.result == journal.PENDING and e.action == REAPPLY
            if e.key == key and e.op != op and (e.result != journal.PENDING or in_flight_reapply) and _same(key, e.new, value):
                return e
        return None

    def _by(self, key: str, value: object, op: str | None, since: float) -> str:
        """Who set ``key`` to ``value`` last, as the journal knows it (another op than ``op``)."""
        e = self._last(key, value, op, since)
        if e is not None and e.action == AUTO_TUNED:
            return "the server's own auto-tune"
        return e.who if e is not None else ""

    def elsewhere(self, sample: Sample) -> list[tuple[str, object, object, str]]:
        """(key, old, new, who) for each setting that changed since the previous reachable
        poll without this session setting it."""
        self._move = self.server_tune.observe(sample)  # journaled before the journal is asked who
        if not sample.reachable:
            self._seen = None  # a restart in between: the new server's first values are no news
            return []
        now = shown(sample)
        before, self._seen = self._seen, now
        across, self._last_seen = self._last_seen, now
        last_reached, self._reachable_at = self._reachable_at, time.time()
        if before is None:  # the first poll, or the first after a gap (a restart in between)
            back = self._carried_back(now, last_reached)
            return back if back else self._tuned_across_gap(across, now)
        out = []
        for key, new in now.items():
            old = before.get(key)
            if new is None or old is None or new == old or key in self._busy:
                continue
            if key in self._mine and _same(key, self._mine[key], new):
                continue
            if key == runtime_settings.THRESHOLD.key and self._move is not None and _same(key, self._move.new, new):
                out.append((key, old, new, AUTO_TUNED))  # the server's own tuner moved it
                continue
            e = self._last(key, new, None, time.time() - 600)
            if key == runtime_settings.THRESHOLD.key and e is not None and e.action == AUTO_TUNED and _same(key, e.old, old):
                # the server's own move, journaled by another observer before this poll showed
                # its move record (N and the move are published a moment apart)
                self._journaled = e
                out.append((key, old, new, AUTO_TUNED))
                continue
            if e is not None and e.action == REAPPLY:  # a restart carried it back: the run's own value
                self._reapplied[key] = e.op or e.time
                out.append((key, old, new, REAPPLY))
                continue
            out.append((key, old, new, e.who if e is not None else ""))
        said = {key for key, *_ in out}
        return out + self._carried_back({k: v for k, v in now.items() if k not in said and before.get(k) == v}, last_reached)

    def _tuned_across_gap(
        self, across: dict[str, object] | None, now: dict[str, object]
    ) -> list[tuple[str, object, object, str]]:
        """N moved by the server's own tuner while polls did not reach it (a poll that timed out
        on a loaded machine): the first poll after the gap shows N at the server's last move's
        ``new``, not at the N the last poll before the gap showed. Said as the server's move, as
        a poll in between would have said it; a session's first poll (``across`` None) says none."""
        key = runtime_settings.THRESHOLD.key
        old, new = (across or {}).get(key), now.get(key)
        if self._move is None or old is None or new is None or _same(key, old, new) or key in self._busy:
            return []
        if not _same(key, self._move.new, new) or (key in self._mine and _same(key, self._mine[key], new)):
            return []
        return [(key, old, new, AUTO_TUNED)]

    def _carried_back(self, now: dict[str, object], since: float | None) -> list[tuple[str, object, object, str]]:
        """Values a poll shows unchanged from the last one it could compare (or after a gap)
        that the run re-applied after a restart since the server was last reached (the
        journal's ``reapply``): the re-apply, said as such, once. Polls far enough apart (a
        loaded machine, a slow link) never see the new server's launch value in between, so
        the change itself is never seen; the restart may even fall between two polls."""
        out: list[tuple[str, object, object, str]] = []
        if since is None or not now or not self._journal_changed():
            return out  # nothing re-applied since the journal was last looked at
        for key, new in now.items():
            e = self._last(key, new, None, since) if new is not None and key not in self._busy else None
            if e is not None and e.action == REAPPLY and self._reapplied.get(key) != (e.op or e.time):
                self._reapplied[key] = e.op or e.time
                out.append((key, e.old, new, REAPPLY))
        return out

    def _journal_changed(self) -> bool:
        """Whether the journal file changed (size, mtime) since the last look: a poll reads it
        only then, not once a setting a poll."""
        try:
            if self._journal_file is None:
                self._journal_file = journal.journal_path(self.state_dir)
            st = self._journal_file.stat()
        except (OSError, ValueError):
            return False
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        changed, self._journal_stamp = stamp != self._journal_stamp, stamp
        return changed

    def words(self, key: str, old: object, new: object, who: str) -> str:
        if who == AUTO_TUNED and self._move is not None:
            return self._move.words(old)
        if who == AUTO_TUNED and self._journaled is not None:
            line = (self._journaled.detail or "").split(" [")[0]
            why = line[line.find("(auto: ") + len("(auto: ") : -1] if "(auto: " in line and line.endswith(")") else ""
            return f"auto-tuned {old} -> {new}" + (f" ({why})" if why else "")
        return f"{runtime_settings.named(key).label} changed elsewhere: {old} -> {new}" + (f", by {who}" if who else "")

    def seen(self, key: str, old: object, new: object, who: str) -> SettingChange:
        """The session's ``last_change`` for one of ``elsewhere``'s changes."""
        if who == REAPPLY:  # the restart carried the run's runtime value back: ours, not another client's
            return change(key, new, ChangeState.APPLIED, "re-applied after the restart")
        state = ChangeState.AUTO_TUNED if who == AUTO_TUNED else ChangeState.ELSEWHERE
        return change(key, new, state, self.words(key, old, new, who))


def _same(key: str, a: object, b: object) -> bool:
    setting = runtime_settings.by_key(key)
    return setting.same(a, b) if setting is not None else a == b
