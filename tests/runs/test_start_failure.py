"""A port taken while the server starts: SGLang binds its HTTP port only once the model has
loaded, and when the port was taken meanwhile uvicorn logs the bind error and SGLang's
process lingers without HTTP. The simulator does the same with ``--sim-bind-late``
(``[sim] bind_late``); these tests take the port for real between the launch's own check
and the server's bind, and read what the supervisor, ``launch --wait`` and the journal say.
Without the log check the run read "starting" until the wait's timeout, and the supervised
run for ever (server_control/supervision/start_failure.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from server_control.config.profile import load_profile
from server_control.host import identity
from server_control.model.vocabulary import RunState
from server_control.state import journal, runs
from server_control.supervision.start_failure import READ_CAP, StartLog, failure_in, with_holders
from server_control.supervision.supervisor import Supervisor
from tests.support import command_forkserver
from tests.support.wait import supervised_until, until

# the line from a real SGLang 0.5.23 log (a rig run whose port was taken during its start)
SGLANG_LINE = (
    "[2026-12-07 13:11:05] ERROR:    [Errno 98] error while attempting to bind on address "
    "('127.0.0.1', 45707): address already in use"
)
LOAD_S = 60.0  # simulated seconds of loading: 3 s at the profiles' x20, time to take the port


def test_the_bind_error_is_read_from_sglangs_line_and_nothing_else():
    f = failure_in(SGLANG_LINE)
    assert f is not None and (f.host, f.port) == ("127.0.0.1", 45707) and f.line == SGLANG_LINE
    v6 = failure_in("ERROR:    [Errno 98] error while attempting to bind on address ('::1', 30000, 0, 0): address already in use")
    assert v6 is not None and (v6.host, v6.port) == ("::1", 30000)
    for other in (
        "[2026-12-07 13:11:05] Load weight begin. avail mem=78.51 GB",
        "[2026-12-07 13:11:05] ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): permission denied",
        'INFO:     127.0.0.1:40001 - "GET /health HTTP/1.1" 200 OK',
    ):
        assert failure_in(other) is None, other


def test_the_log_is_read_forward_in_bounded_pieces_across_partial_lines(tmp_path):
    log = tmp_path / "run.log"
    scan = StartLog(log)
    assert scan.scan() is None  # no log yet: nothing, no error
    head, tail = SGLANG_LINE[:40], SGLANG_LINE[40:]
    log.write_text("x" * (READ_CAP + 10) + "\n" + head)
    assert scan.scan() is None and scan.offset == READ_CAP  # one bounded read
    assert scan.scan() is None  # the rest, the line still partial
    with log.open("a") as f:
        f.write(tail + "\n")
    found = scan.scan()
    assert found is not None and found.port == 45707 and found.line == SGLANG_LINE
    assert scan.scan() is None  # read once
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    assert StartLog(fifo).scan() is None  # a FIFO never blocks the scan


def test_who_holds_the_port_is_named_on_one_line(tmp_path):
    script = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint(s.getsockname()[1], flush=True)\ntime.sleep(30)"
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        port = int(holder.stdout.readline())
        found = with_holders(failure_in(SGLANG_LINE.replace("45707", str(port))))
        assert found.holders and found.holders[0].startswith(f"pid {holder.pid} ("), found.holders
        assert "\n" not in found.words() and "import socket, sys, time s = socket.socket()" in found.words(), found.words()
    finally:
        holder.kill()
        holder.wait()


async def test_a_port_taken_during_the_start_is_a_failed_start_and_the_start_limit_ends_it(make_profile, groups):
    profile = load_profile(make_profile("taken", tp=2, backoff=0.1, burst=2, load_time=LOAD_S, sim_extra="bind_late = true"))
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", profile.port))  # after the launch's own check, before the server binds
        holder.listen()
        await supervised_until(sup, lambda: sup.state == RunState.FATAL, timeout=60, what="FATAL")
        assert identity.run_processes(rec.identity()) == []  # the lingering server was stopped
        assert "address already in use" in sup.fatal_reason.lower() and f"{profile.port}" in sup.fatal_reason, sup.fatal_reason
        entries = [e for e in journal.read() if e.action == "start failed"]
        assert len(entries) == 1, entries
        assert f"127.0.0.1:{profile.port} was taken before it could bind it" in entries[0].detail
        assert f"held by pid {os.getpid()}" in entries[0].detail, entries[0].detail  # who holds it, named
        assert any("address already in use" in ln for ln in sup.fatal_tail)
        # every reader sees the FATAL end: the restart that failed its port check had removed the
        # run record before the check, and the FATAL then lived in this process only ("stopped"
        # for `status` elsewhere, the reason lost)
        kept = runs.load_record("taken")
        assert kept is not None and kept.fatal_reason == sup.fatal_reason, kept
        later = Supervisor(profile)
        assert later.adopt() is None and later.state == RunState.FATAL and later.fatal_reason == sup.fatal_reason
        assert any("address already in use" in ln for ln in later.fatal_tail)


async def test_a_restart_refused_by_the_busy_port_keeps_the_run_and_tries_again_until_the_limit(make_profile, groups):
    """Burst 3: the failed start, then two restarts refused by their own port check. The first
    refused restart had removed the dead run's record, and the next try took the missing
    record for a stop made elsewhere: "stopped", no more restarts, no FATAL."""
    profile = load_profile(make_profile("again", tp=1, backoff=0.1, burst=3, load_time=LOAD_S, sim_extra="bind_late = true"))
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    states: list[RunState] = []
    sup.on_change = lambda s: states.append(s.state)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", profile.port))
        holder.listen()
        await supervised_until(sup, lambda: sup.state in (RunState.FATAL, RunState.STOPPED), timeout=60, what="FATAL or stopped")
    assert RunState.CRASHED in states and RunState.STARTING in states, states  # (the states are seen)
    assert sup.state == RunState.FATAL and RunState.STOPPED not in states, (sup.state, sup.last_error, states)
    refused = [e for e in journal.read() if e.action == "restart failed"]
    assert [e.result for e in refused] == ["restart in 0.2 s", RunState.FATAL], refused
    assert all("is busy or cannot be bound" in e.detail for e in refused), refused
    assert "start limit hit: 3 starts" in sup.fatal_reason and runs.load_record("again").fatal_reason == sup.fatal_reason


def _launch_waiting(profile_path, *extra: str) -> tuple[subprocess.Popen, float]:
    p = subprocess.Popen(
        [sys.executable, "-m", "console", "launch", "--profile", str(profile_path), "--wait", "60", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ),
    )
    return p, time.monotonic()


async def _take_port_once_launched(name: str, port: int, p: subprocess.Popen, groups) -> socket.socket:
    """The port, taken as soon as the launch has recorded its run (its own check is done)."""
    groups.add(p.pid)
    await until(lambda: runs.load_record(name) is not None, timeout=30, what="the run record")
    groups.add(runs.load_record(name).pgid)
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    return holder


async def test_launch_wait_says_the_start_failed_at_once_and_without_a_supervisor_stops_it(make_profile, groups):
    path = make_profile("bare", tp=1, load_time=LOAD_S, sim_extra="bind_late = true")
    profile = load_profile(path)
    p, t0 = _launch_waiting(path, "--no-supervise")
    with await _take_port_once_launched("bare", profile.port, p, groups):
        out, err = p.communicate(timeout=50)
        took = time.monotonic() - t0
        body = json.loads(out)
        assert p.returncode == 1 and body["state"] == RunState.CRASHED, (p.returncode, out, err)
        assert took < 30, took  # not the wait's 60 s
        assert "did not start" in body["error"] and "address already in use" in body["error"], body["error"]
        assert f"held by pid {os.getpid()}" in body["error"]
        rec = runs.load_record("bare")
        assert rec is not None and identity.run_processes(rec.identity()) == []  # stopped: nobody else would


async def test_launch_wait_with_its_supervisor_says_so_and_the_supervisor_stops_it(make_profile, groups):
    path = make_profile("supervised", tp=1, backoff=0.1, burst=1, load_time=LOAD_S, sim_extra="bind_late = true")
    profile = load_profile(path)
    p, t0 = _launch_waiting(path)
    with await _take_port_once_launched("supervised", profile.port, p, groups):
        out, err = p.communicate(timeout=50)
        body = json.loads(out)
        assert p.returncode == 1 and body["state"] == RunState.CRASHED, (p.returncode, out, err)
        assert time.monotonic() - t0 < 30
        assert "did not start" in body["error"] and "address already in use" in body["error"], body["error"]
        first = runs.load_record("supervised")

        def fatal() -> bool:
            rec = runs.load_record("supervised")
            return rec is not None and bool(rec.fatal_reason)

        await until(fatal, timeout=40, what="the supervisor's FATAL")
        assert identity.run_processes(first.identity()) == []
        status = command_forkserver.run(["status", "--profile", str(path), "--json"], timeout=60)
        snap = json.loads(status.stdout)
        assert snap["run"]["state"] == RunState.FATAL, snap["run"]
        assert "address already in use" in json.dumps(snap["run"]), snap["run"]


async def test_a_start_that_never_gets_ready_is_stopped_at_the_start_timeout(make_profile, groups):
    """A load or an initialisation that hangs (NCCL, a rank that never joins): the process lives,
    nothing answers, and its log says nothing. ``[health] start_timeout_s`` ends it as a failed
    start; without the timeout the run read "starting" for ever."""
    path = make_profile(
        "hung",
        tp=1,
        backoff=0.1,
        burst=2,
        load_time=100_000.0,  # ~80 minutes at x20: it never binds in this test
        sim_extra="bind_late = true",
        health_extra="start_timeout_s = 1.5",
    )
    profile = load_profile(path)
    assert profile.health["start_timeout_s"] == 1.5
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    await supervised_until(sup, lambda: sup.state == RunState.FATAL, timeout=60, what="FATAL")
    assert identity.run_processes(rec.identity()) == [] and identity.run_processes(sup.record.identity()) == []
    failed = [e for e in journal.read() if e.action == "start failed"]
    assert len(failed) == 2, failed  # the launch and its one restart, then the start limit
    for e in failed:
        assert "not ready 1.5 s after its start ([health] start_timeout_s; last check: GET " in e.detail, e.detail
    assert "start limit hit: 2 starts" in sup.fatal_reason and "start_timeout_s" in sup.fatal_reason, sup.fatal_reason
