"""`A`: the advisor's view over the server's cost curves (console/screens/advice.py); its
suggestion is applied through ``request_threshold``, as `=` applies N (read back on every
rank, journaled). A mixin of ``ServerScreen`` (console/screens/server.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from console.screens.advice import AdviceScreen

if TYPE_CHECKING:
    from textual.screen import Screen

    from server_control.session.api import SessionLike

    _Base = Screen[Any]
else:
    _Base = object


class AdviceActions(_Base):
    session: SessionLike

    def request_threshold(self, value: object) -> None:
        raise NotImplementedError

    def action_apply_advice(self) -> None:
        self.app.push_screen(AdviceScreen(self.session.advice, self.request_threshold))
