"""Process layer with real processes: detached launch into a log file, finding a run's
processes (group, session, descendants), stop with grace and SIGKILL; records; policy."""

from __future__ import annotations

import os
import stat
import sys
import textwrap

import psutil
import pytest

from server_control.config.profile import LaunchSpec
from server_control.host import identity
from server_control.host.identity import RunIdentity
from server_control.proc import process
from server_control.state import restart_lock, run_logs, runs
from server_control.supervision.restart_policy import RestartPolicy
from tests.support.records import own_record
from tests.support.wait import wait_for

# A leader with three children: one stays in the group, one moves to its own process group
# (same session), one starts a new session (found only as a descendant). Every process has
# a bounded lifetime; the leader optionally ignores SIGTERM.
FAMILY = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    life = float(sys.argv[1]); ignore = sys.argv[2] == "1"
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    def child(pre):
        code = pre + f"import time; time.sleep({life})"
        return subprocess.Popen([sys.executable, "-c", code])
    kids = [child(""), child("import os; os.setpgid(0, 0); "), child("import os; os.setsid(); ")]
    print("leader", os.getpid(), "kids", " ".join(str(k.pid) for k in kids), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    time.sleep(life)
""")


def spawn(tmp_path, groups, ignore_term=False, life=60.0) -> process.Launched:
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    spec = LaunchSpec(
        argv=(sys.executable, str(script), str(life), "1" if ignore_term else "0"),
        env=dict(os.environ),
        env_overrides={},
        log_path=tmp_path / "logs" / "a-1.log",
        cwd=tmp_path,
        exit_file=tmp_path / "exit",
    )
    launched = process.launch(spec)
    groups.add(launched.pgid)
    return launched


def _complete_lines(path) -> list[str]:
    """The log's lines that have their newline: a line can reach the log in pieces (with
    ``PYTHONUNBUFFERED=1``, set on these machines, ``print`` writes each of its parts), so a
    read can end inside one (a loaded four-worker run read "leader <pid>" before its " kids
    ..." part: IndexError)."""
    text = path.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


def kids_of(launched) -> list[int]:
    line = wait_for(
        lambda: next((ln for ln in _complete_lines(launched.log_path) if ln.startswith("leader")), None),
        what="the leader's pid line",
    )
    return [int(x) for x in line.split("kids")[1].split()]


def _cmdline(p: psutil.Process) -> list[str]:
    """A child's command line; an exited, not yet reaped one (another test's) has none."""
    try:
        return p.cmdline()
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return []


def test_launch_detaches_and_logs_both_streams(tmp_path, groups):
    lc = spawn(tmp_path, groups)
    assert os.getsid(lc.pid) == lc.pid == os.getpgid(lc.pid) != os.getsid(0)
    ours = {c.pid: " ".join(_cmdline(c)) for c in psutil.Process().children()}
    assert lc.pid not in ours and not any("server_control.keeper" in c for c in ours.values())
    assert stat.S_IMODE(lc.log_path.stat().st_mode) == 0o600
    kids = kids_of(lc)
    wait_for(lambda: "to stderr" in lc.log_path.read_text(), what="stderr in the log")
    found = wait_for(
        lambda: (lambda s: s if set(kids) <= s else None)({p.pid for p in identity.run_processes(lc.identity())}),
        what="all three children",
    )
    assert lc.pid in found and os.getpid() not in found


def test_second_launch_gets_a_new_log_file(tmp_path, groups):
    a = spawn(tmp_path, groups, life=5)
    b = spawn(tmp_path, groups, life=5)
    assert a.log_path != b.log_path and a.log_path.exists() and b.log_path.exists()


async def test_stop_terminates_every_process_of_the_run(tmp_path, groups):
    lc = spawn(tmp_path, groups)
    kids = kids_of(lc)
    wait_for(lambda: len(identity.run_processes(lc.identity())) == 4, what="4 processes")
    res = await process.stop_run(lc.identity(), grace_s=10, exit_file=tmp_path / "exit")
    assert res.ok and res.was_running and not res.remaining and not res.killed
    assert res.exit_code == -15  # from the keeper: we are not the server's parent
    for pid in [lc.pid, *kids]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert identity.run_processes(lc.identity()) == []


async def test_stop_escalates_to_sigkill_after_grace(tmp_path, groups):
    lc = spawn(tmp_path, groups, ignore_term=True)
    kids_of(lc)
    res = await process.stop_run(lc.identity(), grace_s=0.5, exit_file=tmp_path / "exit")
    assert res.ok and lc.pid in res.killed and res.exit_code == -9
    assert "SIGKILL" in res.message


async def test_stop_of_nothing_and_reused_pid_is_not_ours(tmp_path, groups):
    # our own pid with a wrong start time stands for a reused PID: never signalled
    me = psutil.Process()
    res = await process.stop_run(RunIdentity(me.pid, me.create_time() + 1000, tuple(me.cmdline())), grace_s=0.1)
    assert res.ok and not res.was_running and res.message == "not running"


def test_tail_lines_and_prune_logs(tmp_path):
    log = tmp_path / "x.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(200)) + b"bad \xff end\n")
    tail = run_logs.tail_lines(log, 3)
    assert tail == ["line 198", "line 199", "bad \ufffd end"]
    assert run_logs.tail_lines(tmp_path / "missing.log") == []
    manifest = tmp_path / "manifest"
    for i in range(6):
        p = tmp_path / f"{i}.log"
        p.write_text(str(i))
        os.utime(p, (1000 + i, 1000 + i))
        run_logs.remember(manifest, p)
    (tmp_path / "1.log.1").write_text("rotated part")
    removed = run_logs.prune_listed(manifest, keep=3, protect=(tmp_path / "0.log",))
    assert sorted(p.name for p in removed) == ["1.log", "1.log.1", "2.log"]
    assert sorted(p.name for p in tmp_path.glob("*.log*")) == ["0.log", "3.log", "4.log", "5.log", "x.log"]
    assert run_logs.read_manifest(manifest) == [str(tmp_path / f"{i}.log") for i in (0, 3, 4, 5)]


# ---- run records --------------------------------------------------------------------------
def test_record_roundtrip_mode_0600_and_liveness(state_dir):
    rec = own_record()
    path = runs.save_record(rec)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temp file left
    back = runs.load_record("r")
    assert back == rec and back.is_live()
    assert not own_record(create_time=rec.create_time - 100, start_ticks=rec.start_ticks - 1).is_live()  # reused PID
    assert not own_record(argv=["python", "-m", "other"]).is_live()  # not the recorded command
    assert runs.live_record_on_port(1) == rec and runs.live_record_on_port(1, exclude="r") is None
    assert runs.delete_record("r", pid=rec.pid + 1) is False and runs.delete_record("r") is True
    assert runs.load_record("r") is None


def test_bad_records_are_reported_not_crashed(state_dir):
    path = runs.record_path("bad")
    for text, msg in (
        ("{not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"name": "bad"}', "missing"),
        (own_record(pid="7").to_json(), "pid must be"),
    ):
        path.write_text(text)
        with pytest.raises(runs.RunRecordError, match=msg):
            runs.load_record("bad")
    assert runs.list_records() == []  # unreadable ones skipped
    assert runs.quarantine_record("bad").name == "bad.json.bad"


# ---- restart policy -----------------------------------------------------------------------
def test_backoff_doubles_to_the_cap_and_burst_goes_fatal():
    pol = RestartPolicy(initial_s=1, max_s=30, burst=100, window_s=60)
    assert [pol.delay_for(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    pol = RestartPolicy(initial_s=1, max_s=30, burst=5, window_s=60)
    t = 0.0
    pol.record_start(t)
    outcomes = []
    for _ in range(6):
        t += 0.5  # crashes half a second after each start
        decision, value = pol.after_crash(t, ran_for_s=0.5)
        outcomes.append((decision, value))
        if decision == "fatal":
            break
        t += value
        pol.record_start(t)
    assert outcomes[:4] == [("restart", 1), ("restart", 2), ("restart", 4), ("restart", 8)]
    assert outcomes[4][0] == "fatal" and "5 starts within 60 s" in outcomes[4][1]


def test_long_run_resets_backoff_and_old_starts_leave_the_window():
    pol = RestartPolicy(initial_s=1, max_s=30, burst=2, window_s=10)
    pol.record_start(0)
    assert pol.after_crash(1, ran_for_s=1) == ("restart", 1)
    pol.record_start(2)
    assert pol.after_crash(100, ran_for_s=98) == ("restart", 1)  # stable run: reset; old starts gone
    assert RestartPolicy(enabled=False).after_crash(0)[0] == "fatal"


def test_restart_lock_has_one_holder_at_a_time(state_dir):
    first = restart_lock.RestartLock.acquire("x")
    assert first is not None
    assert restart_lock.RestartLock.acquire("x") is None  # a second console only observes
    assert restart_lock.RestartLock.acquire("y") is not None  # other profiles are independent
    first.release()
    again = restart_lock.RestartLock.acquire("x")
    assert again is not None
    again.release()
