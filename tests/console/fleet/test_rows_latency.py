"""The fleet table's ITL95 column and the aggregate's imbalance flag (issue 35 item 4): pure
functions over rows."""

from __future__ import annotations

from console.fleet.aggregate import aggregate_line, imbalance
from console.fleet.rows import arrange, cells, ms
from server_control.fleet.member import MemberRow


def _row(name: str, itl: float | None) -> MemberRow:
    return MemberRow(name=name, kind="local", host="local", state="ready", reachable=True, itl_p95=itl, tok_s=100.0)


def test_the_cell_and_the_sort():
    assert ms(0.0234) == "23ms" and ms(1.43) == "1.4s" and ms(None) == "-"
    assert cells(_row("a", 0.021), False)["itl_p95"] == "21ms"
    rows = [_row("a", 0.021), _row("b", None), _row("c", 0.058)]
    assert [r.name for r in arrange(rows, "itl_p95", reverse=True)] == ["c", "a", "b"]


def test_imbalance_is_flagged_only_when_one_member_is_twice_the_others_median():
    even = [_row("a", 0.020), _row("b", 0.022), _row("c", 0.025)]
    assert imbalance(even) == ""
    slow = [_row("a", 0.020), _row("b", 0.022), _row("c", 0.058)]
    assert imbalance(slow) == "ITL p95 imbalance: c 58ms vs 21ms (the others' median)"
    assert "ITL p95 imbalance: c" in aggregate_line(slow).plain
    assert imbalance(slow[1:]) == ""  # two members: no median to speak of
    assert imbalance([*slow, _row("d", None)]) != ""  # a member without histograms is left out
