"""A malformed ``/server_info`` entry is named, never raised (``rank_verdict.values_by_rank``):
a rank whose ``dynamic_speculation`` was a string crashed ``threshold 7 --url``."""

from __future__ import annotations

from server_control.protocol.rank_verdict import values_by_rank

KEY = "speculative_disable_batch_threshold"


def test_a_string_in_place_of_the_rank_table_is_named():
    got = values_by_rank({"dynamic_speculation": "oops", KEY: 5}, KEY)
    assert got == [("", "<unreadable: dynamic_speculation is a str, not an object>")]


def test_an_entry_that_is_not_an_object_is_named():
    assert values_by_rank(["x"], KEY) == [("", "<unreadable: the entry is a list, not an object>")]  # type: ignore[arg-type]


def test_well_formed_ranks_and_an_entry_without_them():
    rows = {"dynamic_speculation": {"ranks": [{"rank": 0, "threshold": 7}, {"rank": 1, "threshold": 7}, "junk"]}}
    assert values_by_rank(rows, KEY) == [("TP0", 7), ("TP1", 7)]
    assert values_by_rank({KEY: 9}, KEY) == [("", 9)]


def test_an_integer_setting_that_is_not_an_integer_is_named_with_its_rank():
    rows = {"dynamic_speculation": {"ranks": [{"rank": 0, "threshold": 7}, {"rank": 1, "threshold": float("inf")}]}}
    assert values_by_rank(rows, KEY) == [("TP0", 7), ("TP1", "<unreadable: TP1 threshold is Infinity, not an integer>")]
    assert values_by_rank({KEY: 7.5}, KEY) == [("", "<unreadable: threshold is 7.5, not an integer>")]
    assert values_by_rank({KEY: True}, KEY) == [("", "<unreadable: threshold is true, not an integer>")]


def test_a_rank_reading_infinity_is_one_line_naming_it_not_another_client(stand):
    """Issue 37 item 10: a threshold of ``Infinity`` on a rank was reported as "overridden by
    another client (now N=inf)"."""
    from tests.support.cli import cli

    srv = stand("infinite")
    r = cli("threshold", "7", "--url", srv.url)
    said = r.stdout + r.stderr
    assert r.returncode == 1 and "Traceback" not in said, said
    assert "overridden" not in said and "N=inf" not in said, said
    assert "TP1 reads speculative_disable_batch_threshold=<unreadable: TP1 threshold is Infinity, not an integer>" in said, said
