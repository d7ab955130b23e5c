"""The last fleet action's per-member results; refusals and silences stand out."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from server_control.model.vocabulary import MemberOutcome

STYLE = {
    MemberOutcome.OK: "green",
    MemberOutcome.PENDING: "yellow",
    MemberOutcome.REFUSED: "bold white on red",
    MemberOutcome.NO_ANSWER: "bold white on red",
    MemberOutcome.FAILED: "bold white on red",
}


def summary_line(action: str, results, elapsed_s: float | None = None) -> Text:
    counts: dict[MemberOutcome, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    text = Text(f"{action} on {len(results)}: ")
    for i, (outcome, n) in enumerate(sorted(counts.items(), key=lambda kv: kv[0] != MemberOutcome.OK)):
        if i:
            text.append(", ")
        text.append(f"{n} {outcome}", style=STYLE.get(outcome, ""))
    if elapsed_s is not None:
        text.append(f" in {elapsed_s:.2f} s")
    return text


def render(action: str, results, elapsed_s: float | None = None, max_lines: int = 0) -> Text:
    """The summary, then one line per member (refused / failed / no-answer first); with
    ``max_lines`` the rest is counted on the last line."""
    out = summary_line(action, results, elapsed_s)
    ordered = sorted(results, key=lambda r: (not r.stands_out, r.member))
    shown = ordered if not max_lines or len(ordered) <= max_lines else ordered[: max_lines - 1]
    for r in shown:
        out.append("\n")
        out.append(f" {r.outcome:9s} ", style=STYLE.get(r.outcome, ""))
        out.append(f" {r.member}: {r.detail}")
    if len(shown) < len(ordered):
        out.append(f"\n ... and {len(ordered) - len(shown)} more (--json from `specconsole fleet` lists all)")
    return out


class ResultsPanel(Static):
    """Shows ``render`` of the last action (or a hint before the first one)."""

    # a fixed height: a new result repaints the panel, not the whole screen's layout
    DEFAULT_CSS = "ResultsPanel { height: 10; padding: 0 1; }"
    LINES = 9

    def show(self, action: str, results, elapsed_s: float | None = None) -> None:
        self.results = tuple(results)
        self.update(render(action, self.results, elapsed_s, self.LINES))

    def pending(self, action: str, names) -> None:
        self.update(Text(f"{action}: sent to {len(names)} member(s), waiting for answers...", style="yellow"))
