"""`specconsole supervise --auto-tune LO-HI` on a real simulator run (its own tuner off):
the supervising process moves N from the server's curves, says the move with its
evidence, journals it, and the server reads the new N back on every rank; an operator's N
turns it off and `specconsole threshold auto` turns it back on in the same process (the
request and the answer in the journal), tuning again from the operator's N. Bad bounds are
refused by the parser, naming them; `threshold auto` with no supervising tuner exits 1."""

from __future__ import annotations

import signal

import httpx

from server_control.state import journal, runs
from tests.support.cli import cli, read_until, start_cli

SIM = 'explore_share = 0.1\ntraffic = "phases:s=10000,c=1-14,period=12"'


def test_supervise_tunes_n_and_journals_the_move(make_profile, groups, state_dir):
    path = make_profile("tuned", tp=2, sim_extra=SIM)
    sup = start_cli("supervise", "--profile", str(path), "--auto-tune", "1-16", groups=groups)
    read_until(sup, "tuned: ready")
    groups.add(runs.load_record("tuned").pgid)
    seen = read_until(sup, "Dynamic speculation: threshold 5 -> ")
    line = seen[-1].strip()
    assert "(auto: " in line, line
    new = int(line.split(" -> ")[1].split(" ")[0])
    rec = runs.load_record("tuned")
    url = f"http://{rec.host}:{rec.port}"
    (state,) = httpx.get(url + "/server_info", timeout=5).json()["internal_states"]
    live = state["dynamic_speculation"]
    assert live["threshold"] == new and {r["threshold"] for r in live["ranks"]} == {new}
    assert "auto_tune" not in live  # the simulator's own tuner is off: the move was the supervisor's
    entries = [e for e in journal.read(state_dir) if e.action == "threshold" and e.detail == line]
    assert entries and entries[-1].result == "applied", entries
    sup.send_signal(signal.SIGINT)
    sup.communicate(timeout=30)
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_threshold_auto_turns_the_tuning_back_on(make_profile, groups, state_dir):
    path = make_profile("retuned", tp=2, sim_extra=SIM, lifetime=150)
    sup = start_cli("supervise", "--profile", str(path), "--auto-tune", "1-16", groups=groups)
    read_until(sup, "retuned: ready")
    groups.add(runs.load_record("retuned").pgid)
    read_until(sup, "Dynamic speculation: threshold 5 -> ")
    assert cli("threshold", "13", "--profile", str(path)).returncode == 0  # the operator's N
    read_until(sup, "Dynamic speculation: auto-tune off (threshold set to 13 by the operator)")
    r = cli("threshold", "auto", "--profile", str(path), "--wait", "20")
    assert r.returncode == 0 and "auto-tune on again (asked by " in r.stdout, (r.stdout, r.stderr)
    seen = read_until(sup, "Dynamic speculation: threshold 13 -> ")  # tuning again, from the operator's N
    assert any("auto-tune on again" in line for line in seen), seen
    new = int(seen[-1].split(" -> ")[1].split(" ")[0])
    rec = runs.load_record("retuned")
    (state,) = httpx.get(f"http://{rec.host}:{rec.port}/server_info", timeout=5).json()["internal_states"]
    live = state["dynamic_speculation"]
    assert live["threshold"] == new and {r["threshold"] for r in live["ranks"]} == {new}
    tuning = [e for e in journal.read(state_dir) if e.action == "auto-tune"]
    asked = [e for e in tuning if e.result == "requested"]
    assert len(asked) == 1 and asked[0].program == "specconsole threshold", tuning
    assert [e.result for e in tuning if e.op == asked[0].op] == ["requested", "on"]
    assert next(e for e in tuning if e.result == "on").program == "specconsole supervise"
    sup.send_signal(signal.SIGINT)
    sup.communicate(timeout=30)
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_threshold_auto_without_a_supervising_tuner_says_so(make_profile, state_dir):
    path = make_profile("untuned", tp=1)
    r = cli("threshold", "auto", "--profile", str(path), "--wait", "1")
    assert r.returncode == 1 and "no supervising tuner answered" in r.stderr, r.stderr
    (asked,) = [e for e in journal.read(state_dir) if e.action == "auto-tune"]
    assert asked.result == "requested" and asked.profile == "untuned"


def test_bad_bounds_are_refused_by_name(make_profile, state_dir):
    path = make_profile("badtune", tp=1)
    r = cli("supervise", "--profile", str(path), "--auto-tune", "9-3", "--json")
    assert r.returncode == 2 and "auto-tune bounds" in r.stderr and "9-3" in r.stderr, r.stderr


def test_threshold_auto_by_url_and_wait_only_with_auto(state_dir):
    r = cli("threshold", "auto", "--url", "http://127.0.0.1:9/", "--wait", "0", "--json")
    assert r.returncode == 1 and '"state": "no answer"' in r.stdout, (r.stdout, r.stderr)
    (asked,) = [e for e in journal.read(state_dir) if e.action == "auto-tune"]
    assert asked.target == "http://127.0.0.1:9/" and asked.profile is None
    r = cli("threshold", "7", "--url", "http://127.0.0.1:9", "--wait", "1")
    assert r.returncode == 2 and "--wait goes with `threshold auto`" in r.stderr, r.stderr
