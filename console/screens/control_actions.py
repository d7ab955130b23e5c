"""The app's keys that change the server: threshold N (`+` `-` `=`), forced mode (`F`),
the flapping suggestion (`H`), start / stop / restart (`s` `x` `r`).

Each key becomes a session call in a worker; a question comes first where the answer
matters: N=0 ("never disable") only through `=` and a yes, `-` stops at 1; a restart says
what happens to the settings changed at runtime. Each question is awaited in the action's
own worker (``@work`` + ``push_screen_wait``): the flow reads top to bottom. A mixin of
``ServerScreen`` (console/screens/server.py): it uses the screen's ``session``,
``snapshot``, ``_call`` and ``_desired``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from textual import work

from console.dialogs.confirm import confirm
from console.dialogs.prompt import PromptScreen
from server_control.model import vocabulary
from server_control.model.operation import OperationResult
from server_control.protocol.decision import FORCE_CHOICES, validate_threshold

if TYPE_CHECKING:
    from textual.screen import Screen

    from server_control.model.snapshot import SessionSnapshot
    from server_control.session.api import SessionLike

    _Base = Screen[Any]
else:
    _Base = object

NEVER = "N=0 means never disable: speculate at every decode batch, however large"
LIVE_STATES = (*vocabulary.LIVE_STATES, vocabulary.EXTERNAL_STATE)


class ControlActions(_Base):
    session: SessionLike
    snapshot: SessionSnapshot
    what: str
    _desired: int | None
    _control_lock: asyncio.Lock

    async def _call(self, what: str, call: Awaitable[OperationResult]) -> OperationResult | None:
        raise NotImplementedError

    # ---- threshold and force ---------------------------------------------------------
    def _current_threshold(self) -> int | None:
        if self._desired is not None:
            return self._desired
        change = self.snapshot.last_change
        if change is not None and change.state == vocabulary.ChangeState.PENDING and isinstance(change.requested, int):
            return change.requested
        return self.snapshot.spec.threshold

    def request_threshold(self, value: object) -> None:
        try:
            n = validate_threshold(value)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self._desired = n
        self.run_worker(self._apply_threshold(n), group="control")

    async def _apply_threshold(self, n: int) -> None:
        async with self._control_lock:
            if self._desired != n:
                return  # superseded by a later key press
            await self._call(f"threshold {n}", self.session.set_threshold(n))
            if self._desired == n:
                self._desired = None

    def _step_threshold(self, delta: int) -> None:
        n = self._current_threshold()
        if n is None:
            self.notify("threshold unknown yet (server not read)", severity="warning")
        elif delta < 0 and n + delta < 1:
            self.notify(f"N={n}: `-` stops at 1. {NEVER}; set it with `=` 0 (asks first).", severity="warning", timeout=8)
        else:
            self.request_threshold(n + delta)

    def action_threshold_up(self) -> None:
        self._step_threshold(+1)

    def action_threshold_down(self) -> None:
        self._step_threshold(-1)

    @work(group="control")
    async def action_threshold_prompt(self) -> None:
        """`=`: the exact N; N=0 only after a yes that says what it means."""
        n = self._current_threshold()
        value = await self.app.push_screen_wait(
            PromptScreen(
                "Threshold N (speculate while decode batch <= N; 0 = never disable)",
                validate_threshold,
                "" if n is None else str(n),
                hint="enter applies, escape cancels",
            )
        )
        if value == 0 and not await self.app.push_screen_wait(confirm(f"{NEVER} (the threshold rule is off). Set N=0?")):
            return
        if value is not None:
            self.request_threshold(value)

    def action_cycle_force(self) -> None:
        force = self.snapshot.spec.force or "auto"
        nxt = FORCE_CHOICES[(FORCE_CHOICES.index(force) + 1) % len(FORCE_CHOICES)] if force in FORCE_CHOICES else "auto"
        self.run_worker(self._force(nxt), group="control")

    async def _force(self, mode: str) -> None:
        result = await self._call(f"force {mode}", self.session.set_force(mode))
        if result is not None and result.done:
            self.notify(f"force mode: {mode.replace('_', '-')}")

    def action_apply_suggestion(self) -> None:
        """`H`: apply the flapping suggestion (more hysteresis, else a longer dwell), read back like N."""
        hint = self.snapshot.spec.switch_rate.suggestion
        if hint is None:
            self.notify("no suggestion: the mode is not flapping", severity="information")
            return
        self.run_worker(self._call(f"{hint.name} {hint.value}", self.session.set_setting(hint.key, hint.value)), group="control")

    # ---- server ----------------------------------------------------------------------
    def _owned(self) -> bool:
        if self.snapshot.attached:
            self.notify(
                "attached to a server this console does not own: start/stop/restart are not available", severity="warning"
            )
            return False
        return True

    def action_start_server(self) -> None:
        run = self.snapshot.run
        if not self._owned():
            return
        if run.state in LIVE_STATES and run.pid:
            self.notify(
                f"the {self.what} is already running ({run.state}, pid {run.pid}): r restarts it, x stops it",
                severity="information",
            )
            return
        self.run_worker(self._call("launch", self.session.launch()), group="server")

    @work(group="server")
    async def action_stop_server(self) -> None:
        if self._owned() and await self.app.push_screen_wait(confirm(f"Stop the {self.what}?")):
            await self._call("stop", self.session.stop())

    @work(group="server")
    async def action_restart_server(self) -> None:
        if self._owned() and await self.app.push_screen_wait(confirm(f"Restart the {self.what}? {self._runtime_fate()}")):
            await self._call("restart", self.session.restart())

    def _runtime_fate(self) -> str:
        """What a restart does to the settings changed at runtime (server_control/supervision/carried_settings.py)."""
        changed = ", ".join(f"{k.removeprefix('speculative_disable_')}={v}" for k, v in self.snapshot.run.runtime.items())
        if not changed:
            return "It starts with the profile's settings (none were changed at runtime)."
        return (
            f"Changed at runtime: {changed}. They are re-applied once it is ready (lost, back to the "
            "profile's, only if the profile sets [restart] reapply_runtime = false)."
        )
