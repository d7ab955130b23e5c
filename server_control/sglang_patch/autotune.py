"""The in-server tuner (``--speculative-disable-auto-tune LO-HI``): N decided once, on the
rank that pulls the requests, and applied on every rank from SGLang's own broadcast.

  * Only the rank that pulls requests from the tokenizer (pp_rank 0, attn_tp_rank 0,
    attn_cp_rank 0: TP0) runs ``protocol.tuner.Tuner`` on its own cost curves, at most once
    a second (``POLL_S``, ``time.monotonic``). A move becomes a ``TuneMove`` that
    targets/request_receiver.py adds to ``local_reqs``, so it rides the same
    ``broadcast_pyobj`` over the TP group as the pulled requests.
  * Every rank (TP0 included) takes the ``TuneMove`` objects out of the list the broadcast
    returned (SGLang's dispatcher never sees them) and applies each as a runtime threshold
    change is applied (targets/internal_state.py): the switch's threshold (``runtime_settings.apply``), SGLang's
    override for the readback, the limit warnings, the metrics; then logs the move's line
        Dynamic speculation: threshold 8 -> 10 (auto: target-only faster from batch 10, ...)
    Every rank applies the same move at the same loop iteration: no mixed modes. A move
    whose ``old`` is not the rank's threshold is dropped on every rank alike (logged).
  * A move decided on TP0 stays pending there until it comes back from the broadcast (a
    skipped receive, ``recv_skipper``, drops ``local_reqs``): it is offered again.
  * An operator's threshold (``/set_internal_state``) turns tuning off on every rank
    (``operator_threshold``); ``speculative_disable_auto_tune`` 1/0 turns it on/off
    (``switch``). Both arrive through the broadcast, so every rank's tuner state is alike.
  * Published per rank as ``dynamic_speculation.auto_tune`` (the simulator's shape:
    on, off_reason, bounds, moves, last_move; moves and last_move are those this rank
    applied). Not configured: ``_active`` stays None and the receive wrapper does nothing.
    With DP attention each DP group pulls its own requests: the tuner stays off (reason).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from server_control.protocol import cost_curves, decision, runtime_settings
from server_control.protocol.tuner import MOVE_PREFIX, OPERATOR_OFF, Move, Tuner, TuneSettings, parse_bounds, start_share
from server_control.sglang_patch.sglang_shapes import RankState

logger = logging.getLogger("sglang.srt.managers.scheduler_components.request_receiver")

POLL_S = 1.0
_active: list[AutoTune | None] = [None]  # the process's AutoTune while the flag is set (one scheduler per process)


@dataclass(frozen=True)
class TuneMove:
    """A threshold move decided on TP0, carried to every rank in SGLang's request broadcast."""

    old: int
    new: int
    line: str


def active() -> AutoTune | None:
    return _active[0]


def configure(dyn: RankState, text: str, clock: Callable[[], float] = time.monotonic) -> AutoTune | None:
    """At start-up (worker.init_state): the flag's ``LO-HI`` (validated by the parser) -> this
    process's AutoTune, also held as ``dyn.autotune``; empty -> None."""
    _active[0] = None
    if not text or dyn.switch is None:
        return None
    try:
        settings = parse_bounds(text)
    except ValueError as exc:  # not through the CLI parser (Engine API): say so, serve on
        logger.warning(f"Dynamic speculation: auto-tune off: {exc}")
        return None
    at = AutoTune(dyn, settings, clock)
    dyn.autotune = _active[0] = at
    if dyn.curves is not None:  # exact buckets up to the top bound: the modes compared at one batch
        from server_control.sglang_patch import curves

        dyn.curves = curves.new(cost_curves.tuned_cap(settings.hi))
    if not dyn.explorer.share:  # exploration with auto-tune unless set (0 at runtime turns it off)
        dyn.explorer.set_share(start_share(None, True))
    return at


def pulls() -> bool:
    """Whether this rank pulls the requests that are broadcast (SGLang's own condition)."""
    from sglang.srt.runtime_context import get_parallel

    p = get_parallel()
    return bool(p.pp_rank == 0 and p.attn_tp_rank == 0 and p.attn_cp_rank == 0)


def dp_attention() -> bool:
    from sglang.srt.runtime_context import get_parallel

    return bool(get_parallel().attn_dp_enabled)


class AutoTune:
    def __init__(self, dyn: RankState, settings: TuneSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.dyn = dyn
        self.tuner = Tuner(settings)
        self.clock = clock
        self.pending: TuneMove | None = None
        self.applied = 0
        self.last: TuneMove | None = None
        self._last_poll: float | None = None
        self._puller: bool | None = None

    def start_line(self) -> str:
        s = self.tuner.settings
        return (
            f"Dynamic speculation: auto-tune on, N within {s.lo}-{s.hi} (decided on TP0 every "
            f"{s.interval_s:g} s from the last {s.window_s:g} s of cost curves, broadcast to every rank)"
        )

    # --- TP0: decide -------------------------------------------------------------
    def offer(self) -> TuneMove | None:
        """On the pulling rank: a move to add to ``local_reqs`` (a pending one first), else None."""
        if self._puller is None:
            self._puller = pulls()
            if dp_attention():
                self.tuner.off("DP attention: each DP group pulls its own requests, no single decision")
        if not self._puller:
            return None
        if self.pending is not None:
            return self.pending
        now = self.clock()
        if self._last_poll is not None and now - self._last_poll < POLL_S:
            return None
        self._last_poll = now
        dyn = self.dyn
        if not self.tuner.on or not dyn.ready or dyn.curves is None or dyn.switch is None:  # ready: a switch
            return None
        move = self.tuner.observe(now, cost_curves.parse(dyn.curves.snapshot()), dyn.switch.threshold, dyn.explorer.share > 0)
        if move is not None:
            self.pending = TuneMove(move.old, move.new, move.line)
        return self.pending

    # --- every rank: apply ---------------------------------------------------------
    def take(self, reqs: list[object]) -> list[object]:
        """The broadcast's list without TuneMove objects, each of them applied here."""
        if not reqs:
            return reqs
        moves = [r for r in reqs if type(r) is TuneMove]
        if not moves:
            return reqs
        self.pending = None
        for move in moves:
            self.apply(move)
        return [r for r in reqs if type(r) is not TuneMove]

    def apply(self, move: TuneMove) -> None:
        switch = self.dyn.switch
        assert switch is not None  # configure() makes an AutoTune only for a rank with a switch
        if switch.threshold != move.old or not self.tuner.on:
            why = self.tuner.off_reason if not self.tuner.on else f"the threshold is {switch.threshold} now"
            logger.info(f"Dynamic speculation: auto-tune move {move.old} -> {move.new} dropped ({why})")
            return
        runtime_settings.apply(switch, runtime_settings.THRESHOLD, move.new)
        self.applied += 1
        self.last = move
        logger.info(move.line)
        _as_runtime_change(self.dyn, move.new)

    # --- every rank: the operator ----------------------------------------------------
    def operator_threshold(self, value: object) -> None:
        """An operator's threshold wins: tuning off until asked again."""
        self.pending = None
        if self.tuner.on:
            self.tuner.off(f"threshold set to {value} by the operator")
            logger.info(OPERATOR_OFF.format(value))

    def switch(self, on: bool) -> str:
        self.pending = None
        if on:
            self.tuner.turn_on()
            self._last_poll = None
            return "Dynamic speculation: auto-tune on"
        self.tuner.off("turned off through /set_internal_state")
        return "Dynamic speculation: auto-tune off (asked)"

    def snapshot(self) -> dict[str, object]:
        snap = self.tuner.snapshot()
        m = self.last
        snap["moves"] = self.applied
        snap["last_move"] = {"old": m.old, "new": m.new, "evidence": _evidence(m)} if m else None
        return snap


def _evidence(move: TuneMove) -> str:
    head = f"{MOVE_PREFIX}{move.old} -> {move.new} (auto: "
    return move.line[len(head) : -1] if move.line.startswith(head) else move.line


def _as_runtime_change(dyn: RankState, new: int) -> None:
    """What the rest of a runtime threshold change does (targets/internal_state.py):
    SGLang's override (the readback), the bounded overrides log, the limit warnings, the
    metrics. Never raises into the scheduler loop."""
    try:
        from sglang.srt.runtime_context import get_context

        from server_control.sglang_patch import metrics, overrides, startup

        context = get_context()
        if decision.THRESHOLD_KEY in type(context.server_args).__struct_fields__:
            context.override(source="update_server_args", **{decision.THRESHOLD_KEY: new})
            overrides.compact(context)
        startup.warn_limits(dyn)
        metrics.publish()
    except Exception as exc:  # noqa: BLE001 - the switch moved; the readback is best effort
        logger.warning(f"Dynamic speculation: auto-tune move applied, readback not updated ({exc!r})")


__all__ = ["POLL_S", "AutoTune", "Move", "TuneMove", "active", "configure"]
