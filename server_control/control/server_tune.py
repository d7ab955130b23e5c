"""The server's own tuning moves (``--speculative-disable-auto-tune LO-HI``, the simulator's
``--sim-auto-tune``), seen in polls and journaled once each.

A server that tunes N itself publishes ``dynamic_speculation.auto_tune`` {on, off_reason,
bounds, moves, last_move {old, new, evidence}} (sglang_patch/autotune.py, sim/autotune.py).
``ServerTuneWatch.observe(sample)`` compares a reachable poll with the moves it has seen:
when ``moves`` grew past the last move it saw applied and the threshold now is
``last_move.new``, that move was the server's own. The record comes first (the tuner
decides) and N a step later (the scheduler applies the move from its settings queue), so a
poll in between sees the record ahead of N; the move is seen at the poll that shows N.
It is journaled (state/journal.py) as action ``server auto-tune``, key the threshold,
``old`` -> ``new``, result ``applied``, ``detail`` the move's log line with its evidence,
``op`` the move's identity (``move_op``: a digest of the target, the server's move count,
old, new and evidence). Any number of observers (consoles, ``specconsole supervise``, one
restarted) may see the same move: the entry is written only when no entry of that ``op``
is in the journal yet, checked and appended under one lock (``<state dir>/journal.jsonl.
tune.lock``), so each move is journaled once. An observer's first poll journals the last
move too when the threshold is still its ``new`` (a move nobody watched), and a server
whose count went down (it restarted) is treated as new.

``specconsole supervise`` of a profile whose server tunes itself (``tunes_itself``) polls
``/server_info`` every ``FOLLOW_EVERY_S`` while it supervises the run (``follow``), so the
moves are journaled with no console open; a console's session sees them in its own polls.

Only the last move is published: when several moves fall between two polls, the entry is
the last one's, and its ``detail`` says how many moves the poll saw (the earlier ones'
lines are in the server log).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from server_control.protocol import decision
from server_control.protocol.tuner import Move
from server_control.state import journal
from server_control.state.private_files import FileLock, LockTimeout
from server_control.telemetry.sample import Sample, intval

ACTION = "server auto-tune"  # the journal's action for a move the server's own tuner made
LOCK_WAIT_S = 2.0
FOLLOW_EVERY_S = 2.0  # `specconsole supervise`'s poll of a server that tunes itself


@dataclass(frozen=True)
class ServerMove:
    """The server's last move as one poll shows it (``moves``: its count of moves so far)."""

    moves: int
    old: int
    new: int
    evidence: str

    @property
    def line(self) -> str:
        """The server's own log line of the move (the tuner's words)."""
        return Move(self.old, self.new, self.evidence).line

    def words(self, old: object = None) -> str:
        """What the console says: ``auto-tuned 8 -> 10 (target-only faster from batch 10, ...)``;
        ``old``: the N the previous poll showed (several moves since: from there)."""
        start = self.old if old is None else old
        return f"auto-tuned {start} -> {self.new} ({self.evidence})"


def auto_tune_of(sample: Sample) -> tuple[int | None, ServerMove | None]:
    """(the server's move count, its last move) from DP rank 0's ``auto_tune``; (None, None)
    when the server does not tune itself."""
    r0 = sample.ranks[0] if sample.ranks else None
    raw = (r0.dynamic or {}).get("auto_tune") if r0 is not None else None
    if not isinstance(raw, dict):
        return None, None
    moves = intval(raw.get("moves"))
    last = raw.get("last_move")
    if moves is None or not isinstance(last, dict):
        return moves, None
    old, new, ev = intval(last.get("old")), intval(last.get("new")), last.get("evidence")
    if old is None or new is None or moves < 1:
        return moves, None
    return moves, ServerMove(moves, old, new, ev if isinstance(ev, str) else "")


def move_op(target: str, move: ServerMove) -> str:
    """The move's identity in the journal: equal for every observer of the same move."""
    text = f"{target.rstrip('/')}|{move.moves}|{move.old}|{move.new}|{move.evidence}"
    return "tune-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class ServerTuneWatch:
    def __init__(self, target: str, state_dir: str | Path | None = None, profile: str | None = None) -> None:
        self.target = target.rstrip("/")
        self.state_dir = state_dir
        self.profile = profile
        self._polled = False  # a reachable poll since the last unreachable one (else the next is a first)
        self._prev_n: int | None = None  # the threshold at the previous poll
        self._told: int | None = None  # the move count up to which moves were seen applied (returned)

    def observe(self, sample: Sample) -> ServerMove | None:
        """The server's own move this poll shows (journaled once), or None."""
        if not sample.reachable:
            self._polled, self._told = False, None  # a restart may come in between: the next poll is a first one
            return None
        moves, move = auto_tune_of(sample)
        threshold = sample.threshold
        first, told, prev_n = not self._polled, self._told, self._prev_n
        self._polled, self._prev_n = True, threshold
        if first:
            self._told = moves  # what came before an observer's first poll is no news (but journaled, below)
        if move is None or moves is None or threshold != move.new:
            return None  # no move, or its record published ahead of N (decided, not yet applied)
        if not first and told is not None and moves == told:
            return None  # seen already
        if not first and told is not None and moves > told:
            self.journal(move, moves - told, prev_n)
        else:  # a first poll, or a restarted server: journaled unless someone did already
            self.journal(move, None, None)
        self._told = moves
        return move

    def journal(self, move: ServerMove, seen: int | None, prev_n: int | None) -> bool:
        """Append the move's entry unless its ``op`` is in the journal already; True if written."""
        op = move_op(self.target, move)
        detail = move.line
        if seen is not None and seen > 1:
            detail += f" [{seen} moves since the previous poll (N was {prev_n}); the earlier ones are in the server log]"
        elif seen is None:
            detail += " [seen at the first poll of an observer or of a restarted server]"
        try:
            path = journal.journal_path(self.state_dir)
            with FileLock(path.with_name(journal.JOURNAL_NAME + ".tune.lock"), "the journal's tune lock").acquire_sync(
                LOCK_WAIT_S
            ):
                if _journaled(path, op):
                    return False
                return (
                    journal.record(
                        self.state_dir,
                        ACTION,
                        target=self.target,
                        profile=self.profile,
                        key=decision.THRESHOLD_KEY,
                        old=move.old,
                        new=move.new,
                        result="applied",
                        detail=detail,
                        op=op,
                    )
                    is not None
                )
        except (OSError, LockTimeout):  # the journal never fails an observer
            return False


def _journaled(path: Path, op: str) -> bool:
    """Whether an entry with ``op`` is in the journal or its rotated file: a byte search
    (a few ms for 10 MB, never a JSON parse of the whole file on the console's loop)."""
    needle = json.dumps({"op": op})[1:-1].encode("utf-8")  # '"op": "tune-..."' as record() writes it
    for p in (path, path.with_name(journal.JOURNAL_NAME + ".1")):
        try:
            if needle in p.read_bytes():
                return True
        except OSError:
            continue
    return False


TUNE_FLAGS = ("--speculative-disable-auto-tune", "--sim-auto-tune")  # a server that tunes itself


def tunes_itself(server_args: list[str]) -> bool:
    """Whether the launch flags ask the server to tune N itself."""
    return any(a == f or a.startswith(f + "=") for a in server_args for f in TUNE_FLAGS)


async def follow(
    watch: ServerTuneWatch,
    poll: Callable[[], Awaitable[Sample]],
    stop: asyncio.Event,
    *,
    every_s: float = FOLLOW_EVERY_S,
    when: Callable[[], bool] = lambda: True,
    say: Callable[[ServerMove], None] = lambda _move: None,
) -> None:
    """A process without a session (``specconsole supervise``): poll every ``every_s`` while
    ``when()`` (it supervises the run) until ``stop``; each new move journaled and said."""
    while not stop.is_set():
        if when():
            try:
                move = watch.observe(await poll())
            except Exception:  # noqa: BLE001 - a failed poll is no move
                move = None
            if move is not None:
                say(move)
        try:
            await asyncio.wait_for(stop.wait(), every_s)
        except TimeoutError:
            pass
