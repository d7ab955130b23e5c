"""`specconsole supervise` of a run whose server tunes N itself (the simulator's
``auto_tune``, as ``--speculative-disable-auto-tune`` on SGLang), with no console open:
each of the server's moves is said and journaled once (action ``server auto-tune``, by the
supervising process), a second supervise after the first detached (an observer restart)
adds no copy, and `specconsole journal` lists them."""

from __future__ import annotations

import signal

from server_control.control.server_tune import ACTION
from server_control.protocol.tuner import MOVE_PREFIX
from server_control.state import journal, runs
from tests.support.cli import cli, read_until, start_cli

SIM = 'auto_tune = "1-16"\nexplore_share = 0.1\ntraffic = "phases:s=10000,c=1-14,period=12"'


def test_supervise_journals_the_servers_own_moves_once(make_profile, groups, state_dir):
    path = make_profile("selftuned", tp=2, sim_extra=SIM)
    sup = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(sup, "selftuned: ready")
    groups.add(runs.load_record("selftuned").pgid)
    said = read_until(sup, f"{MOVE_PREFIX}5 -> ")[-1]
    assert "(auto: " in said, said
    sup.send_signal(signal.SIGINT)  # detach: the server keeps running and tuning
    sup.communicate(timeout=30)
    again = start_cli("supervise", "--profile", str(path), groups=groups)  # an observer restart
    read_until(again, "adopted selftuned")
    read_until(again, MOVE_PREFIX)  # at least its first poll's move
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=30)
    assert cli("stop", "--profile", str(path)).returncode == 0

    moves = [e for e in journal.read(state_dir) if e.action == ACTION]
    assert moves and all(e.program == "specconsole supervise" and e.profile == "selftuned" for e in moves), moves
    assert len({e.op for e in moves}) == len(moves), [e.detail for e in moves]  # once per move
    line = said[said.index(MOVE_PREFIX) :]
    (first,) = [e for e in moves if e.detail.split(" [")[0] == line]  # the move said is the one journaled
    assert first.old == 5, first
    listed = cli("journal", "--profile", str(path))
    assert listed.returncode == 0, listed.stderr
    rows = [ln for ln in listed.stdout.splitlines() if f"  {ACTION}  " in ln]
    assert len(rows) == len(moves) and any(f"selftuned  {ACTION}  5 -> {first.new}  applied  {line}" in r for r in rows), rows
