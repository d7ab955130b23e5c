"""The seed's question, answered from the log: did every scheduler rank log ``Dynamic
speculation disable enabled: threshold=N``? ``explain`` gives each rank's init line (its
line number and text), the patch's NOT active lines, or, when no rank logged it, what that
means and where to look. `specconsole verify --explain` prints it (text and JSON)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from server_control.logs import Record

INIT_TEXT = "Dynamic speculation disable enabled: threshold=N"
NOT_IN_SERVER = (
    "no rank logged the init line: the switch is not in this server (the scheduler processes "
    "did not load the patch), or its log goes elsewhere"
)
WHERE_TO_LOOK = (
    "the launcher: the profile's command must start `python -m server_control.sglang_patch.serve` "
    "(stock `sglang.launch_server` never loads the patch)",
    "the bootstrap in the server's interpreter: `specconsole patch status --profile F`",
    "the log: the file given to --log (or the profile's run log) must be the server's own",
)
NO_LOG = "no server log attached: give the log file (--log FILE with --url, or --profile F) to read the init line"


@dataclass(frozen=True)
class LogLine:
    rank: str  # "TP0", "DP1 TP0"; "main" for a line without a rank prefix
    line: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class InitExplanation:
    init: tuple[LogLine, ...]  # one per rank that logged it, in rank order (DP, then TP): the ranks race to log
    not_active: tuple[LogLine, ...]
    verdict: str  # one line: what the log says
    where_to_look: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "init": [x.to_json() for x in self.init],
            "not_active": [x.to_json() for x in self.not_active],
            "verdict": self.verdict,
            "where_to_look": list(self.where_to_look),
        }

    def text(self) -> str:
        out = [f"init line ({INIT_TEXT}): {self.verdict}"]
        out += [f"  {x.rank:<8} log line {x.line}: {x.text}" for x in self.init]
        out += [f"  {x.rank:<8} log line {x.line}: {x.text}" for x in self.not_active]
        out += [f"  look at: {w}" for w in self.where_to_look]
        return "\n".join(out)


def _rank_order(rank: str) -> tuple[int, ...]:
    """ "main" first, then "TP0" < "TP1" < "DP1 TP0" (by DP, then TP; numbers, not text)."""
    numbers = [int(n) for n in re.findall(r"\d+", rank)]
    return (0,) if rank == "main" else (1, *([0] * (2 - len(numbers))), *numbers)


def _line(rec: Record) -> LogLine:
    return LogLine(rec.rank or "main", getattr(rec, "line", None), rec.text)


def explain(init: list[Record], not_active: list[Record], *, log_attached: bool, ranks_expected: int) -> InitExplanation:
    """Each rank's first init line; the NOT active lines; what the log says."""
    by_rank: dict[str, Record] = {}
    for rec in init:
        by_rank.setdefault(rec.rank or "main", rec)
    lines = tuple(sorted((_line(r) for r in by_rank.values()), key=lambda x: _rank_order(x.rank)))
    refused = tuple(_line(r) for r in not_active)
    if not log_attached:
        return InitExplanation(lines, refused, NO_LOG)
    if refused:
        return InitExplanation(lines, refused, "the patch loaded but said it is NOT active (the reason is in its line)")
    if not lines:
        return InitExplanation((), (), NOT_IN_SERVER, WHERE_TO_LOOK)
    if len(lines) < ranks_expected:
        return InitExplanation(
            lines,
            (),
            f"only {len(lines)} of {ranks_expected} ranks logged it: the others did not load the patch",
            WHERE_TO_LOOK,
        )
    return InitExplanation(lines, (), f"every rank logged it ({len(lines)} of {ranks_expected})")
