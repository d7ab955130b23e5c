"""Which records the log view shows, and what it keeps back (counted, one key away):
the filter (`/` and the quick filters), polling access lines (hidden unless `a`: every
client's successful reads of the endpoints monitors poll, server_control/logs/access.py),
and the copies of one event that every TP rank logs (folded into one row `TP0-7` unless
`t`, console/widgets/log/rank_fold.py)."""

from __future__ import annotations

from collections.abc import Iterable

from console.widgets.log.format import LineFilter
from console.widgets.log.rank_fold import RankFolder
from server_control.logs import Record
from server_control.logs.access import is_polling
from server_control.logs.record import HTTP


class Selection:
    def __init__(self, flt: LineFilter, show_polls: bool = False, fold: bool = True) -> None:
        self.filter = flt
        self.show_polls = show_polls
        self.folder = RankFolder() if fold else None
        self.shown = 0  # records shown
        self.polls_hidden = 0  # polling access lines kept back

    @property
    def folded(self) -> int:
        return self.folder.folded if self.folder is not None else 0

    def take(self, records: Iterable[Record]) -> list[Record]:
        """The records to show, in order (counts what it keeps back)."""
        accepts = self.filter.accepts if self.filter.active else None
        out = []
        for rec in records:
            if not self.show_polls and rec.kind == HTTP and is_polling(rec):
                self.polls_hidden += 1
            elif accepts is not None and not accepts(rec):
                continue
            elif self.folder is not None and self.folder.fold(rec) is not None:
                continue
            else:
                out.append(rec)
        self.shown += len(out)
        return out

    def label(self, seq: int) -> str | None:
        """'TP0-7' for a shown record that others were folded into."""
        return self.folder.label(seq) if self.folder is not None else None
