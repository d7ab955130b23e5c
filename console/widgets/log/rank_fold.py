"""Folding the same event logged by every TP rank into one row (`TP0-7`).

SGLang's TP ranks each log the same line (the patch's init line, every switch, every
threshold change, the same exception) within the same second; with TP 8 the log view shows
eight copies of each. A record folds into an earlier one of the same DP group when its
message is the same, its time stamp at most one second later (ranks straddle a second
boundary) and its rank not yet among the folded ones. Pure:
the log view keeps a ``RankFolder`` per build of its rows.
"""

from __future__ import annotations

import re
from datetime import datetime

_TP = re.compile(r"\bTP(\d+)\b")
RECENT = 64  # how many distinct events are remembered (within the last two seconds)
WITHIN_S = 1  # a rank's copy is at most this many seconds after the first


def split_rank(rank: str | None) -> tuple[str, int] | None:
    """'DP1 TP3' -> ('DP1', 3); 'TP0 EP0' -> ('', 0); no TP tag -> None (nothing to fold)."""
    if not rank:
        return None
    m = _TP.search(rank)
    if m is None:
        return None
    group = " ".join(part for part in rank.split() if part.startswith(("DP", "PP")))  # EP follows TP
    return group, int(m.group(1))


def rank_label(ranks: list[int]) -> str:
    """[0, 1, 2, 3] -> 'TP0-3'; [0, 2, 5] -> 'TP0,2,5'."""
    ranks = sorted(set(ranks))
    if len(ranks) > 2 and ranks[-1] - ranks[0] == len(ranks) - 1:
        return f"TP{ranks[0]}-{ranks[-1]}"
    return "TP" + ",".join(str(r) for r in ranks)


def relabel(line: str, rank: str, label: str) -> str:
    """The first line of a folded record with its rank tag replaced by the fold's label."""
    m = _TP.search(rank)
    if m is None:
        return line
    tag = m.group(0)
    at = line.find(tag + "]")
    if at < 0:
        at = line.find(tag)
    return line if at < 0 else line[:at] + label + line[at + len(tag) :]


class RankFolder:
    """Feed records in order; ``fold(rec)`` returns the seq of the record it folds into (the
    caller skips it) or None (the caller shows it). ``ranks[seq]`` lists the TP ranks folded
    into a shown record, its own first (only records that others were folded into)."""

    def __init__(self) -> None:
        self.ranks: dict[int, list[int]] = {}
        self.folded = 0  # records folded away
        self._recent: dict[tuple, tuple[int, int, int]] = {}  # event -> (seq, TP rank, second) of its first row
        self._stamp: tuple[str, int] = ("", 0)  # the last time stamp seen, in seconds

    def fold(self, rec) -> int | None:
        kind = getattr(rec, "kind", None)
        if kind in ("decode", "prefill", "http", "console"):
            return None  # TP0-only lines (stats differ anyway), or ours
        where = split_rank(getattr(rec, "rank", None))
        ts = getattr(rec, "ts", None)
        if where is None or not ts:
            return None
        second = self._seconds(ts[:19])
        if second is None:
            return None
        group, tp = where
        key = (group, kind, getattr(rec, "text", ""))
        head = self._recent.get(key)
        if head is not None and 0 <= second - head[2] <= WITHIN_S:
            ranks = self.ranks.setdefault(head[0], [head[1]])
            if tp not in ranks:
                ranks.append(tp)
                self.folded += 1
                return head[0]
        self._recent.pop(key, None)
        self._recent[key] = (rec.seq, tp, second)
        if len(self._recent) > RECENT:
            self._recent.pop(next(iter(self._recent)))
        return None

    def _seconds(self, stamp: str) -> int | None:
        if stamp != self._stamp[0]:
            try:
                self._stamp = (stamp, int(datetime.fromisoformat(stamp.replace(" ", "T")).timestamp()))
            except ValueError:
                return None
        return self._stamp[1]

    def label(self, seq: int) -> str | None:
        """'TP0-7' for a shown record that others folded into, else None."""
        ranks = self.ranks.get(seq)
        return rank_label(ranks) if ranks and len(ranks) > 1 else None
