"""The advisor's panel: the suggested N with its 95 % interval, the sentence, the
acceptance and context it was measured at, and tok/s per mode at the batches around N.
It only renders the ``Advice`` it is handed (``console/screens/advice.py`` reads the
server and applies the suggestion)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from server_control.advice.words import Advice

NEAR = 4  # buckets shown each side of the crossover


class AdvicePanel(Static):
    DEFAULT_CSS = "AdvicePanel { height: auto; max-height: 6; border: round $primary-darken-2; padding: 0 1; }"

    advice: reactive[Advice | None] = reactive(None, always_update=True, layout=True)
    note: reactive[str] = reactive("advisor: reading the server's cost curves", layout=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "advice"

    def render(self) -> Text:
        adv = self.advice
        if adv is None:
            return Text(self.note, style="dim")
        e = adv.estimate
        out = Text()
        out.append(adv.sentence, style="bold" if adv.confident else "")
        acc = f"{e.accept_length:.2f}" if e.accept_length is not None else "-"
        ctx = f"{e.mean_context:.0f}" if e.mean_context is not None else "n/a"
        cross = f"crossover batch {e.crossover}" if e.crossover is not None else "no crossover"
        out.append(f"\n{cross}, accept length {acc}, mean context {ctx}")
        center = e.crossover or (adv.current or 1)
        cells = []
        for b in range(max(1, center - NEAR), center + NEAR):
            s, t = e.tok_s("speculative", b), e.tok_s("target_only", b)
            if s is None or t is None:
                continue
            cells.append(f"{b}:{s:.0f}/{t:.0f}")
        if cells:
            out.append("\ntok/s spec/target-only at batch  " + "  ".join(cells), style="dim")
        if self.note:
            out.append(f"\n{self.note}", style="dim")
        return out
