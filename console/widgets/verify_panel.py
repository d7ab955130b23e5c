"""Verification checklist: the three layers (configuration, initialisation, runtime) with
pass / fail / pending; focus it (tab) and move with up/down to read a layer's evidence."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.binding import Binding
from textual.reactive import reactive

from console.widgets.fmt import mark
from console.widgets.snapshot_view import SnapshotView
from server_control.model.snapshot import SessionSnapshot
from server_control.model.verification import Verification, VerifyLayer
from server_control.model.vocabulary import Verdict

LAYERS = ("configuration", "initialisation", "runtime")


def layers_of(ver: Verification) -> list[VerifyLayer]:
    found = {layer.name: layer for layer in ver.layers}
    return [found.get(name) or VerifyLayer(name, Verdict.PENDING) for name in LAYERS]


class VerifyPanel(SnapshotView, can_focus=True):
    BINDINGS = [Binding("up", "move(-1)", "Up", show=False), Binding("down", "move(1)", "Down", show=False)]
    DEFAULT_CSS = "VerifyPanel { height: 12; } VerifyPanel:focus { background-tint: $foreground 6%; }"

    selected: reactive[int] = reactive(0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "verification"

    def pick(self, snap: SessionSnapshot) -> Verification:
        return snap.verify

    def action_move(self, delta: int) -> None:
        self.selected = (self.selected + delta) % len(LAYERS)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def render(self) -> Group:
        layers = layers_of(self.part)
        lines = []
        for i, layer in enumerate(layers):
            ch, style = mark(layer.status)
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append("\u25b8 " if self.has_focus and i == self.selected else "  ")
            t.append(ch, style)
            t.append(f" {i + 1}. {layer.name} ")
            t.append(layer.status, style)
            lines.append(t)
        chosen = layers[self.selected]
        if self.has_focus:
            lines.append(Text(f"evidence: {chosen.evidence or '(none yet)'}", "italic"))
            if chosen.cause:
                lines.append(Text(f"likely cause: {chosen.cause}", "bold red"))
        else:
            lines.append(Text("tab to focus, up/down for evidence", "dim"))
        return Group(*lines)
