"""`D`: every line of the top of the server screen in full, wrapped (issue 35 item 6: at 80 or
120 columns the status lines, the reason, the latency, the advice and the last change are
cut with an ellipsis). Esc, q or D closes it."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from console.screens.help import ReadingScreen
from server_control.model.latency import line as latency_line
from server_control.model.mode_reason import mode_reason
from server_control.model.snapshot import SessionSnapshot


def details_text(snap: SessionSnapshot, status_lines: tuple[Text, ...], advice: str | None) -> Text:
    """The screen's top lines, each whole: the status bar's (as drawn), why the mode, the
    latency over 60 s with p99, the advice's sentence, the last change, the GPUs' reason."""
    out = Text()

    def part(title: str, body: str | Text) -> None:
        out.append(f"{title}\n", style="bold underline")
        out.append(body if isinstance(body, Text) else Text(body))
        out.append("\n\n")

    part("status", Text("\n").join(status_lines))
    if snap.server.reachable and not snap.server.foreign:
        part("why this mode", mode_reason(snap.spec, snap.live.batch) or "-")
    else:
        part("server", snap.server.error or "not reachable")
    part("latency", latency_line(snap.server.latency, 60.0))
    if advice:
        part("advice", advice)
    lc = snap.last_change
    if lc is not None:
        part("last change", f"{lc.key or 'setting'} -> {lc.requested}: {lc.state}. {lc.detail}")
    if snap.run.last_error or snap.run.runtime_note:
        part("run", "\n".join(x for x in (snap.run.last_error, snap.run.runtime_note) if x))
    if not snap.gpus.available:
        part("GPUs", f"N/A: {snap.gpus.reason}")
    return out


class DetailsScreen(ReadingScreen):
    BINDINGS = [Binding("D", "dismiss_page", "Close")]
    PAGE_ID = "details-text"

    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text

    def page(self) -> Text:
        return self.text
