"""The last fleet action's per-member results; refusals and silences stand out."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from server_control.fleet.member import FAILED, NO_ANSWER, OK, PENDING, REFUSED

STYLE = {OK: "green", PENDING: "yellow", REFUSED: "bold white on red", NO_ANSWER: "bold white on red",
         FAILED: "bold white on red"}


def summary_line(action: str, results, elapsed_s: float | None = None) -> Text:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    text = Text(f"{action} on {len(results)}: ")
    for i, (outcome, n) in enumerate(sorted(counts.items(), key=lambda kv: kv[0] != OK)):
        if i:
            text.append(", ")
        text.append(f"{n} {outcome}", style=STYLE.get(outcome, ""))
    if elapsed_s is not None:
        text.append(f" in {elapsed_s:.2f} s")
    return text


def render(action: str, results, elapsed_s: float | None = None) -> Text:
    out = summary_line(action, results, elapsed_s)
    for r in sorted(results, key=lambda r: (not r.stands_out, r.member)):
        out.append("\n")
        out.append(f" {r.outcome:9s} ", style=STYLE.get(r.outcome, ""))
        out.append(f" {r.member}: {r.detail}")
    return out


class ResultsPanel(Static):
    """Shows ``render`` of the last action (or a hint before the first one)."""

    DEFAULT_CSS = "ResultsPanel { height: auto; max-height: 12; padding: 0 1; }"

    def show(self, action: str, results, elapsed_s: float | None = None) -> None:
        self.results = tuple(results)
        self.update(render(action, self.results, elapsed_s))

    def pending(self, action: str, names) -> None:
        self.update(Text(f"{action}: sent to {len(names)} member(s), waiting for answers...", style="yellow"))
