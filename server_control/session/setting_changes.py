"""A session's runtime-setting changes (protocol/runtime_settings.py): refused when what
answers is not this run's server, shown pending, journaled and confirmed against other
clients (control/guard.py), read back on every rank (control/settings.py), kept in the run
record for a restart, and dated for the rule's damping (the switch rate is measured from
the last change of a setting that damps).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from server_control.control.guard import SettingGuard, shown
from server_control.control.settings import Control, change
from server_control.model.snapshot import SettingChange
from server_control.model.vocabulary import ChangeState
from server_control.protocol import runtime_settings
from server_control.telemetry.sample import Sample


class SettingChanges:
    """``refusal()``: why steering is off now (what answers is not this run's server), or
    None; ``current()``: the last poll; ``remember(key, value)``: keep an applied value for the
    next restart (None, or why it is NOT kept); ``on_change(change)``: the session's
    ``last_change`` and its subscribers; ``poke()``: poll now."""

    def __init__(
        self,
        control: Control,
        guard: SettingGuard,
        *,
        refusal: Callable[[], str | None],
        current: Callable[[], Sample | None],
        remember: Callable[[str, object], Awaitable[str | None]],
        on_change: Callable[[SettingChange], None],
        poke: Callable[[], None],
    ) -> None:
        self.control = control
        self.guard = guard
        self._refusal = refusal
        self._current = current
        self._remember = remember
        self._on_change = on_change
        self._poke = poke
        self.damping_at: float | None = None  # the last change of a setting that damps (N, hysteresis, dwell)

    def damped(self, at: float) -> None:
        """A setting that damps the rule changed at ``at`` (wall clock)."""
        if self.damping_at is None or at > self.damping_at:
            self.damping_at = at

    def seen_elsewhere(self, key: str, at: float) -> None:
        """A poll showed ``key`` changed by someone else (another client, a restart's re-apply)."""
        setting = runtime_settings.by_key(key)
        if setting is not None and setting.damps:
            self.damped(at)

    async def set(self, key: str, requested: object) -> SettingChange:
        """``key`` (a server-argument name) to ``requested``; the change as it ended."""
        setting = runtime_settings.by_key(key)
        if setting is None:
            return change(key, requested, ChangeState.REFUSED, f"{key} is not a runtime setting")
        refusal = self._refusal()
        if refusal is not None:
            return change(key, requested, ChangeState.REFUSED, refusal)
        self._on_change(change(key, requested, ChangeState.PENDING, "sent; waiting for every DP rank to read back"))
        last = self._current()
        old = shown(last).get(key) if last is not None and last.reachable else None
        # journaled; a concurrent change that wins makes it "overridden"
        result = await self.guard.change(key, requested, lambda value: self.control.set_setting(key, value), old)
        if result.state == ChangeState.APPLIED:
            lost = await self._remember(key, requested)  # re-applied after a restart
            if lost:
                detail = f"applied now, NOT kept across a restart: {lost} ({result.detail})"
                result = replace(result, state=ChangeState.NOT_KEPT, detail=detail)
            if setting.damps:
                self.damped(time.time())
        self._on_change(result)
        self._poke()
        return result
