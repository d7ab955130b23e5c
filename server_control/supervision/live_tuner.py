"""N tuned from live traffic outside the server: the protocol tuner on ``/server_info`` curves.

A decision taken from timings must be taken once for the whole server and reach every
rank as a runtime change does (mixed modes hang a TP group). The SGLang patch does not
tune; this is the one place that decides for a real server: one ``LiveTuner`` per run
(the supervisor's process), reading the server's cumulative cost curves every poll
(``advice.source.read_server``: capped, with a deadline), feeding them to
``protocol.tuner.Tuner`` (the simulator's tuner: bounds, rate, hysteresis, reversal hold,
phase restart), and applying each move through the normal control client
(``/set_internal_state``, broadcast to every rank by SGLang, read back), logged and
journaled with its evidence::

    Dynamic speculation: threshold 8 -> 10 (auto: target-only faster from batch 10, ...)

An operator's N wins: when the server's threshold is not the one the tuner last saw or
set (someone else set it), tuning turns off (one line, journaled) until asked again:
``asks`` gives the requests to turn it back on (``specconsole threshold auto``,
supervision/tune_requests.py), each answered in the journal with its ``op``, and the N
found then is taken as the tuner's. The threshold is read again right before a move is
applied, so a change made meanwhile is seen; a change landing in the few milliseconds between that read and the move is
overwritten by the move (and then turns tuning off at the next poll, the operator's value
lost): said in docs/advice.md. A forced mode is never tuned. A server that restarted
(fewer steps than the last reading) starts a new window, and its N is taken as found.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from server_control.advice.source import SourceError, read_server
from server_control.model.vocabulary import ChangeState
from server_control.protocol import decision, runtime_settings
from server_control.protocol.tuner import Move, Tuner, TuneSettings
from server_control.state.journal import Entry

OFF_LINE = "Dynamic speculation: auto-tune off (threshold set to {n} by the operator)"
ON_LINE = "Dynamic speculation: auto-tune on again (asked by {who})"
ALREADY_ON_LINE = "Dynamic speculation: auto-tune already on (asked by {who})"


class LiveTuner:
    def __init__(
        self,
        url: str,
        control: Any,  # control.settings.Control: values(), set_threshold()
        settings: TuneSettings,
        *,
        api_key: str | None = None,
        say: Callable[[str], None] = lambda _line: None,
        journal: Callable[..., None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        asks: Callable[[], list[Entry]] = lambda: [],
    ) -> None:
        self.url, self.control, self.api_key = url, control, api_key
        self.tuner = Tuner(settings)
        self.say, self.journal, self.clock, self.asks = say, journal, clock, asks
        self.known: int | None = None  # the threshold last seen or set by the tuner
        self._steps = 0  # decode steps in the last reading (fewer: the server restarted)
        self.last_error: str | None = None

    def _operator(self, n: int) -> None:
        self.tuner.off(f"threshold set to {n} by the operator")
        line = OFF_LINE.format(n=n)
        self.say(line)
        if self.journal is not None:
            self.journal("auto-tune", "off", line, key=decision.THRESHOLD_KEY, new=n)

    def _answer(self, ask: Entry) -> None:
        """A request to turn tuning on: on (a new window), said and answered in the journal
        with the request's ``op``. Either way the N found next is taken as the tuner's own:
        an operator's N set just before asking, not yet seen, does not turn it off again."""
        line = (ALREADY_ON_LINE if self.tuner.on else ON_LINE).format(who=ask.who)
        if not self.tuner.on:
            self.tuner.turn_on()
        self.known = None
        self.say(line)
        if self.journal is not None:
            self.journal("auto-tune", "on", line, op=ask.op)  # no key: it changes no setting

    async def step(self) -> Move | None:
        """One poll: read, maybe decide, maybe apply. Returns the move applied (or None)."""
        for ask in self.asks():
            self._answer(ask)
        try:
            reading = await asyncio.to_thread(read_server, self.url, self.api_key)
        except SourceError as exc:
            self.last_error = str(exc)
            return None
        self.last_error = None
        steps = sum(b.steps for b in reading.curves.buckets)
        if steps < self._steps and self.tuner.on:  # restarted: its counters start afresh
            self.tuner.turn_on()  # a new window; the restart's N is not the operator's
            self.known = None
        self._steps = steps
        n = reading.threshold
        if not self.tuner.on or n is None or reading.force not in (None, decision.AUTO):
            return None
        if self.known is not None and n != self.known:
            self._operator(n)
            return None
        self.known = n
        move = self.tuner.observe(self.clock(), reading.curves, n, reading.explore_share > 0)
        if move is None:
            return None
        now = await self.control.values(decision.THRESHOLD_KEY)
        if any(v != n for v in now):  # set meanwhile: the operator's value stands
            self._operator(next(v for v in now if v != n))
            return None
        change = await self.control.set_setting(runtime_settings.THRESHOLD.key, move.new)
        if change.state != ChangeState.APPLIED:
            line = f"Dynamic speculation: auto-tune move {move.old} -> {move.new} not applied ({change.state}: {change.detail})"
            self.say(line)
            if self.journal is not None:
                self.journal("threshold", change.state, line, key=decision.THRESHOLD_KEY, old=move.old, new=move.new)
            return None
        self.known = move.new
        self.say(move.line)
        if self.journal is not None:
            self.journal("threshold", "applied", move.line, key=decision.THRESHOLD_KEY, old=move.old, new=move.new)
        return move

    async def run(self, stop: asyncio.Event, every_s: float = 1.0, when: Callable[[], bool] = lambda: True) -> None:
        """Poll until ``stop``; only while ``when()`` (the process supervises the run: one
        decider per server, never a watching-only second supervise)."""
        while not stop.is_set():
            if when():
                await self.step()
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                pass

    def snapshot(self) -> dict[str, Any]:
        return dict(self.tuner.snapshot(), last_error=self.last_error)
