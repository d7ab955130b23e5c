"""Folding the same event logged by every TP rank (pure part of the log view's `t`)."""

from __future__ import annotations

from console.widgets.log.rank_fold import RankFolder, rank_label, relabel, split_rank
from server_control.logs import parse_text


def records(lines):
    recs = parse_text("\n".join(lines) + "\n")
    for i, r in enumerate(recs, 1):
        r.seq = i
    return recs


def test_every_rank_of_a_switch_folds_into_the_first():
    lines = [
        f"[2026-11-29 10:00:06 TP{i}] Dynamic speculation: switched to target-only (decode batch 9 > threshold 5)"
        for i in range(8)
    ]
    lines.insert(3, "[2026-11-29 10:00:06 TP0] Decode batch, #running-req: 9, #token: 1, gen throughput (token/s): 5.0")
    folder = RankFolder()
    shown = [r for r in records(lines) if folder.fold(r) is None]
    assert [r.kind for r in shown] == ["spec_switch", "decode"]
    assert folder.label(shown[0].seq) == "TP0-7" and folder.folded == 7
    assert relabel(shown[0].raw, shown[0].rank, "TP0-7").startswith("[2026-11-29 10:00:06 TP0-7] Dynamic")


def test_ranks_straddling_a_second_boundary_fold():
    lines = [
        "[2026-11-29 10:00:58 TP1] Dynamic speculation disable enabled: threshold=5, resume_at<=4",
        "[2026-11-29 10:00:59 TP0] Dynamic speculation disable enabled: threshold=5, resume_at<=4",
    ]
    folder = RankFolder()
    assert [folder.fold(r) for r in records(lines)] == [None, 1] and folder.label(1) == "TP0,1"


def test_different_seconds_groups_or_messages_do_not_fold():
    lines = [
        "[2026-11-29 10:00:06 DP0 TP0] Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)",
        "[2026-11-29 10:00:06 DP1 TP1] Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)",  # DP group
        "[2026-11-29 10:00:08 DP0 TP2] Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)",  # later
        "[2026-11-29 10:00:08 DP0 TP3] Dynamic speculation: threshold changed 8 -> 9 (resume_at<=8)",  # text
        "[2026-11-29 10:00:08 DP0 TP2] Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)",
    ]  # same rank
    folder = RankFolder()
    assert [folder.fold(r) for r in records(lines)] == [None, None, None, None, None]


def test_labels_and_rank_parsing():
    assert rank_label([3, 0, 1, 2]) == "TP0-3" and rank_label([0, 2, 5]) == "TP0,2,5" and rank_label([0, 1]) == "TP0,1"
    assert split_rank("DP1 TP3") == ("DP1", 3) and split_rank("TP0 EP0") == ("", 0) and split_rank(None) is None
