"""Who supervises, said right: `status` names the supervisor (or nobody) and how a dead
run ended ("crashed (exit -9, signal 9)", not "stopped"); a second `supervise` says it
only watches; `supervise` detaching from a crashed server does not say "left running";
bad inputs that stop a launch are named before it (log_dir, a loose state dir)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from server_control.state import runs
from server_control.state.state_dir import resolve_state_dir
from tests.support.cli import cli, read_until, start_cli
from tests.support.wait import wait_for


def test_status_says_crashed_with_its_exit_code_when_nobody_supervises(make_profile, groups, state_dir):
    path = make_profile("nobody", tp=1)
    r = cli("launch", "--profile", str(path), "--wait", "60", "--json", "--no-supervise")
    assert r.returncode == 0, r.stderr
    rec = runs.load_record("nobody")
    groups.add(rec.pgid)
    os.killpg(rec.pgid, signal.SIGKILL)
    wait_for(lambda: not rec.is_live(), what="the server gone")
    snap = json.loads(cli("status", "--profile", str(path), "--json").stdout)
    assert snap["run"]["state"] == "crashed" and snap["run"]["exit_code"] == -9, snap["run"]
    assert snap["run"]["supervisor"] is None
    text = cli("status", "--profile", str(path)).stdout
    assert "run: crashed (exit -9, signal 9)" in text and "supervisor: none" in text, text
    assert runs.load_record("nobody") is not None  # kept until someone acts on it
    assert cli("launch", "--profile", str(path)).returncode == 0
    groups.add(runs.load_record("nobody").pgid)
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_a_second_supervise_says_it_only_watches(make_profile, groups, state_dir):
    path = make_profile("two", tp=1)
    first = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(first, "two: ready")
    groups.add(runs.load_record("two").pgid)
    second = start_cli("supervise", "--profile", str(path), groups=groups)
    seen = read_until(second, "adopted two")
    seen.append(second.stdout.readline())
    assert f"watching only: specconsole supervise pid {first.pid} supervises this run" in seen[-1], seen
    status = cli("status", "--profile", str(path)).stdout
    assert f"supervisor: specconsole supervise, pid {first.pid}" in status, status
    first.send_signal(signal.SIGINT)  # the first leaves: the second takes over
    first.communicate(timeout=30)
    read_until(second, "now supervising")
    second.send_signal(signal.SIGINT)
    assert "server left running" in second.communicate(timeout=30)[0]
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_detaching_from_a_crashed_server_does_not_say_left_running(make_profile, groups, state_dir):
    path = make_profile("gone", tp=1)
    path.write_text(
        path.read_text()
        .replace("backoff_initial_s = 0.2", "backoff_initial_s = 30.0")
        .replace("backoff_max_s = 2.0", "backoff_max_s = 30.0")
    )
    sup = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(sup, "gone: ready")
    rec = runs.load_record("gone")
    groups.add(rec.pgid)
    os.killpg(rec.pgid, signal.SIGKILL)
    read_until(sup, "restart in ")  # crashed, waiting out the backoff
    sup.send_signal(signal.SIGINT)
    out = sup.communicate(timeout=30)[0]
    assert "left running" not in out and "detached; the server is not running (crashed, exit code -9" in out, out
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_unusable_log_dir_is_named_by_dry_run_and_refused_by_launch(make_profile, state_dir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    path = make_profile("ld", tp=1)
    path.write_text(path.read_text().replace('kind = "sim"\n', f'kind = "sim"\nlog_dir = "{blocker}/logs"\n'))
    dry = cli("launch", "--profile", str(path), "--dry-run")
    assert (
        dry.returncode == 0 and f"[server] log_dir: no log file can be created there: {blocker} is not a directory" in dry.stderr
    ), dry.stderr
    real = cli("launch", "--profile", str(path))
    assert real.returncode == 2 and "[server] log_dir" in real.stderr, real.stdout + real.stderr
    assert runs.load_record("ld") is None


def test_a_loose_state_dir_is_refused_by_every_command(make_profile, state_dir):
    path = make_profile("loose", tp=1)
    resolve_state_dir()
    os.chmod(state_dir, 0o777)
    try:
        for args in (("launch",), ("stop",), ("status",), ("supervise",)):
            r = cli(*args, "--profile", str(path))
            assert r.returncode == 2, (args, r.stdout + r.stderr)
            assert "group- or world-writable (mode 0777)" in r.stderr and "chmod go-w" in r.stderr, r.stderr
            assert "Traceback" not in r.stderr
    finally:
        os.chmod(state_dir, 0o700)


def test_supervise_port_runs_the_profile_on_the_port_given_and_refuses_a_bad_one(make_profile, groups, state_dir):
    """`supervise --port N`: the port a fleet console moved a member to (issue 34 item 5)."""
    from server_control.host.ports import free_port  # noqa: PLC0415

    path = make_profile("moved", tp=1)
    for bad in ("0", "65536", "x"):
        r = cli("supervise", "--profile", str(path), "--port", bad)
        assert r.returncode == 2 and "--port" in r.stderr, (bad, r.stderr)
    port = free_port()
    sup = start_cli("supervise", "--profile", str(path), "--port", str(port), groups=groups)
    read_until(sup, "moved: ready")
    rec = runs.load_record("moved")
    groups.add(rec.pgid)
    assert rec.port == port
    sup.send_signal(signal.SIGINT)
    sup.communicate(timeout=30)
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_a_supervisor_killed_is_said_and_the_next_one_says_it_took_over(make_profile, groups, state_dir):
    """Issue 34 item 4: a supervisor that died (kill -9) left `status` saying only "none",
    as if nobody had ever supervised; now it names the one that ended without detaching,
    and the next supervisor says whom it took over from. A clean detach says neither."""
    path = make_profile("lost", tp=1)
    first = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(first, "lost: ready")
    groups.add(runs.load_record("lost").pgid)
    first.send_signal(signal.SIGINT)  # the negative control: a clean detach
    first.communicate(timeout=30)
    text = cli("status", "--profile", str(path)).stdout
    assert "supervisor: none (nobody restarts" in text and "without detaching" not in text, text
    second = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(second, "adopted lost")
    wait_for(lambda: (runs.load_record("lost").supervisor or {}).get("pid") == second.pid, 30, what="the record naming it")
    os.kill(second.pid, signal.SIGKILL)  # killed: no detach, its entry left in the record
    second.communicate(timeout=30)
    text = cli("status", "--profile", str(path)).stdout
    assert f"supervisor: none: specconsole supervise pid {second.pid}" in text and "ended without detaching" in text, text
    snap = json.loads(cli("status", "--profile", str(path), "--json").stdout)
    assert snap["run"]["lost_supervisor"]["pid"] == second.pid and snap["run"]["supervisor"] is None
    third = start_cli("supervise", "--profile", str(path), groups=groups)
    seen = read_until(third, "took over supervision from")
    assert f"pid {second.pid}, which ended without detaching" in seen[-1], seen
    third.send_signal(signal.SIGINT)
    third.communicate(timeout=30)
    assert cli("stop", "--profile", str(path)).returncode == 0


def test_adopt_only_with_nothing_running_launches_nothing(make_profile, groups, state_dir):
    """`supervise --adopt-only` (a console starting a supervisor for a live run found without
    one; it was `--handed-off`): when the run was stopped meanwhile (from another terminal)
    it found nothing and LAUNCHED a new server on the profile's port,
    left running with nobody to stop it. It now says so and ends."""
    path = make_profile("handed", tp=1)
    proc = start_cli("supervise", "--profile", str(path), "--adopt-only", groups=groups)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # before the fix: it launched and supervises
        out = ""
    rec = runs.load_record("handed")
    if rec is not None:  # before the fix: a server was launched; stopped by its group at the end
        groups.add(rec.pgid)
    assert rec is None, out
    assert proc.returncode == 0, out
    assert "nothing to supervise" in out and "launched" not in out, out
