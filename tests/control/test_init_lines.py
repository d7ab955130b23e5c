"""`verify --explain`: each rank's init line with its line number, or what no init line
means and where to look (server_control/control/init_lines.py), on the real parser's
records and through the CLI against the simulator (tp 2)."""

from __future__ import annotations

import json

from server_control.control.init_lines import NO_LOG, NOT_IN_SERVER, explain
from server_control.logs import Parser
from server_control.logs.lines import LineSplitter
from server_control.logs.parse import records_from_columns
from tests.support.cli import cli
from tests.support.sim import start_sim

INIT = "Dynamic speculation disable enabled: threshold=4, resume_at<=3, min_dwell_steps=2"


def _records(*lines: str):
    """The real splitter and parser over ``lines`` (as iter_file reads a file)."""
    splitter, parser = LineSplitter(), Parser()
    got, text = splitter.feed(("\n".join(lines) + "\n").encode())
    out = list(records_from_columns(*parser.feed(got, text)))
    return out + list(records_from_columns(*parser.flush()))


def _split(records):
    return [r for r in records if r.kind == "spec_init"], [r for r in records if r.kind == "error"]


def test_every_rank_with_its_line():
    recs = _records(
        f"[2026-12-04 10:00:00 TP0] {INIT}", "[2026-12-04 10:00:00 TP1] something", f"[2026-12-04 10:00:01 TP1] {INIT}"
    )
    got = explain(*_split(recs), log_attached=True, ranks_expected=2)
    assert [(x.rank, x.line) for x in got.init] == [("TP0", 1), ("TP1", 3)]
    assert got.verdict == "every rank logged it (2 of 2)" and not got.where_to_look
    assert "TP1      log line 3: Dynamic speculation disable enabled" in got.text()


def test_the_ranks_in_rank_order_whichever_logged_first():
    """The ranks race to log their init line (TP1 before TP0 in a CI run): shown by rank."""
    recs = _records(
        f"[2026-12-04 10:00:00 DP1 TP0] {INIT}",
        f"[2026-12-04 10:00:00 TP1] {INIT}",
        f"[2026-12-04 10:00:01 TP0] {INIT}",
    )
    got = explain(*_split(recs), log_attached=True, ranks_expected=3)
    assert [(x.rank, x.line) for x in got.init] == [("TP0", 3), ("TP1", 2), ("DP1 TP0", 1)]


def test_no_init_line_says_what_it_means_and_where_to_look():
    recs = _records("[2026-12-04 10:00:00 TP0] The server is fired up and ready to roll!")
    got = explain(*_split(recs), log_attached=True, ranks_expected=1)
    assert got.verdict == NOT_IN_SERVER and got.init == ()
    assert any("server_control.sglang_patch.serve" in w for w in got.where_to_look)
    assert any("patch status" in w for w in got.where_to_look)
    partial = explain(*_split(_records(f"[2026-12-04 10:00:00 TP0] {INIT}")), log_attached=True, ranks_expected=2)
    assert partial.verdict.startswith("only 1 of 2 ranks logged it") and partial.where_to_look
    assert explain([], [], log_attached=False, ranks_expected=1).verdict == NO_LOG


def test_a_not_active_line_is_shown():
    line = "[2026-12-04 10:00:00 TP0] Dynamic speculation disable NOT active: speculative_eagle_topk=4 (only topk=1 is supported)"
    got = explain(*_split(_records(line)), log_attached=True, ranks_expected=1)
    assert got.verdict.startswith("the patch loaded but said it is NOT active")
    assert [x.text for x in got.not_active] == [line.split("] ", 1)[1]]


def test_verify_explain_on_the_simulator(tmp_path):
    with start_sim(tmp_path, tp=2, lifetime=60) as sim:
        sim.wait_ready()
        text = cli("verify", "--url", sim.url, "--log", str(sim.log_path), "--explain", "--wait", "5")
        as_json = cli("verify", "--url", sim.url, "--log", str(sim.log_path), "--explain", "--json")
        bare = cli("verify", "--url", sim.url, "--explain", "--json")
    assert "every rank logged it (2 of 2)" in text.stdout, text.stdout
    assert "TP0      log line" in text.stdout and "TP1      log line" in text.stdout
    lines = json.loads(as_json.stdout)["init_lines"]
    assert [x["rank"] for x in lines["init"]] == ["TP0", "TP1"] and all(isinstance(x["line"], int) for x in lines["init"])
    assert json.loads(bare.stdout)["init_lines"]["verdict"] == NO_LOG
