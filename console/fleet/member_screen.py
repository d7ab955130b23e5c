"""One member's server screen: the single-server screen (``ServerScreen``) over that
member's session, pushed by the fleet screen on `enter`. ``escape`` (when the log view has
no filter or search left to clear) and `q` dismiss it, back to the fleet table (a member's
`q` never asks to stop the whole fleet); ctrl+q dismisses it with "quit": the fleet's
question follows (the fleet owns the sessions: this screen neither starts nor closes one)."""

from __future__ import annotations

from textual.binding import Binding

from console.screens.server import ServerScreen
from server_control.session.api import SessionLike

QUIT = "quit"  # the result of a member screen dismissed by ctrl+q


class MemberScreen(ServerScreen):
    BINDINGS = [Binding("escape", "back_to_fleet", "Fleet", show=False)]

    def __init__(self, member: str, session: SessionLike, fleet_name: str) -> None:
        super().__init__(session, start_session=False)
        self.member = member
        self.sub_title = f"member {member} of fleet {fleet_name} (escape or q: back to the fleet; ctrl+q: quit)"

    def action_back_to_fleet(self) -> None:
        """escape: the log view clears its filter or search first (console/widgets/log/view.py);
        with nothing left to clear the key comes here."""
        self.dismiss()

    def action_quit_console(self) -> None:
        """`q` on a member's screen: back to the fleet (as escape), no question."""
        self.dismiss()

    def quit_fleet(self) -> None:
        """ctrl+q on a member's screen: back to the fleet, and the fleet's quit question."""
        self.dismiss(QUIT)
