"""The advisor's panel: the suggested N with its 95 % interval, the sentence, the
acceptance and context it was measured at, how the crossover was found (measured in both
modes, or extrapolated), and tok/s per mode at the batches around it: measured (with its
standard error) where that batch ran in that mode, else the fitted line's value marked `~`.
It only renders the ``Advice`` it is handed (``console/screens/advice.py`` reads the
server and applies the suggestion)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from server_control.advice.words import Advice
from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY
from server_control.protocol.crossover import TRUSTED_EXTRAPOLATION, Estimate

NEAR = 4  # buckets shown each side of the crossover


def _rate(e: Estimate, mode: str, batch: int) -> str | None:
    """Measured tok/s with its standard error where a bucket of ``mode`` holds ``batch``,
    else the fitted line's value marked ``~`` (it may extrapolate far), else None."""
    p = next((p for p in e.points if p.mode == mode and p.lo <= batch <= (p.hi or batch)), None)
    if p is not None:
        return f"{p.tok_s:.0f}±{p.tok_s_se:.0f}"
    fitted = e.tok_s(mode, batch)
    return None if fitted is None else f"~{fitted:.0f}"


def batch_cell(e: Estimate, batch: int) -> str | None:
    s, t = _rate(e, SPECULATIVE, batch), _rate(e, TARGET_ONLY, batch)
    return None if s is None or t is None else f"{batch}:{s}/{t}"


def crossover_source(e: Estimate) -> str:
    """How the crossover was found, in a few words."""
    if e.bands and e.extrapolated == 0:
        return "measured in both modes"
    if e.bands and e.extrapolated <= TRUSTED_EXTRAPOLATION:
        return f"at the edge of the batches both modes ran, from {e.bands[0].lo}"
    if e.extrapolated > 0:
        return f"extrapolated {e.extrapolated:.0f} batches beyond the data"
    return "where the fitted lines cross"


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
        if e.crossover is not None:
            cross += f" ({crossover_source(e)})"
        out.append(f"\n{cross}, accept length {acc}, mean context {ctx}")
        center = e.crossover or (adv.current or 1)
        cells = [c for b in range(max(1, center - NEAR), center + NEAR) if (c := batch_cell(e, b))]
        if cells:
            out.append("\ntok/s speculative/target-only by batch (± measured, ~ fitted):  " + "  ".join(cells), style="dim")
        if self.note:
            out.append(f"\n{self.note}", style="dim")
        return out
