"""Verification checklist: the three layers (configuration, initialisation, runtime) with
pass / fail / pending; focus it (tab) and move with up/down to read a layer's evidence."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from console.widgets.fmt import mark, section

LAYERS = ("configuration", "initialisation", "runtime")


def layers_of(snap: dict) -> list[dict]:
    found = {l.get("name"): l for l in section(snap, "verify").get("layers") or [] if isinstance(l, dict)}
    return [found.get(name) or {"name": name, "status": "pending", "evidence": None, "cause": None}
            for name in LAYERS]


class VerifyPanel(Widget, can_focus=True):
    BINDINGS = [Binding("up", "move(-1)", "Up", show=False), Binding("down", "move(1)", "Down", show=False)]
    DEFAULT_CSS = "VerifyPanel { height: 12; } VerifyPanel:focus { background-tint: $foreground 6%; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snap: dict = {}
        self.selected = 0
        self.border_title = "verification"

    def show(self, snap: dict) -> None:
        if section(snap, "verify") != section(self._snap, "verify"):
            self.refresh()
        self._snap = snap

    def action_move(self, delta: int) -> None:
        self.selected = (self.selected + delta) % len(LAYERS)
        self.refresh()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def render(self):
        layers = layers_of(self._snap)
        lines = []
        for i, layer in enumerate(layers):
            ch, style = mark(layer.get("status"))
            t = Text(no_wrap=True, overflow="ellipsis")
            pointer = "\u25b8 " if self.has_focus and i == self.selected else "  "
            t.append(pointer)
            t.append(ch, style)
            t.append(f" {i + 1}. {layer.get('name')} ")
            t.append(str(layer.get("status") or "pending"), style)
            lines.append(t)
        chosen = layers[self.selected]
        if self.has_focus:
            lines.append(Text(f"evidence: {chosen.get('evidence') or '(none yet)'}", "italic"))
            if chosen.get("cause"):
                lines.append(Text(f"likely cause: {chosen.get('cause')}", "bold red"))
        else:
            lines.append(Text("tab to focus, up/down for evidence", "dim"))
        return Group(*lines)
