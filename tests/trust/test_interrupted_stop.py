"""An interrupted ``stop`` (SIGHUP from a dropped ssh link, SIGTERM, Ctrl-C) finishes what
it started: a process of the run that ignores SIGTERM still gets its SIGKILL after the grace,
and the stop says it was interrupted (trust round 4 item 2: it exited at once, rc 129, and
the process kept running). Real processes and real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from server_control.state import runs
from tests.support.sim import REPO_ROOT, group_pids
from tests.support.trust import cli

# the run's leader starts a child that ignores SIGTERM, then becomes the simulator
WRAPPER = "#!/bin/sh\n(trap '' TERM; exec sleep 300) &\nexec {python} \"$@\"\n"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def in_grace(leader: int, stopper: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Wait until the stop has sent SIGTERM (the run's leader is gone) and is in its grace.
    A fixed sleep raced the stopper's own start-up under load: signalled before it had
    begun, it died with nothing stopped (stop said nothing)."""
    deadline = time.monotonic() + timeout_s
    while _running(leader):
        assert stopper.poll() is None, "the stop ended before its grace"
        assert time.monotonic() < deadline, "the stop never sent SIGTERM"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_stop_interrupted_in_its_grace_still_kills_what_ignores_sigterm(make_profile, state_dir, groups, tmp_path, sig):
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    profile = make_profile(name=f"is{int(sig)}", tp=1, grace=3.0)
    profile.write_text(profile.read_text().replace(f'python = "{sys.executable}"', f'python = "{wrapper}"'))
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    rec = runs.load_record(profile.stem)
    groups.add(rec.pgid)
    stopper = subprocess.Popen(
        [sys.executable, "-m", "console", "stop", "--profile", str(profile)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    in_grace(rec.pid, stopper)  # the leader went on SIGTERM; the sleep ignored it
    stopper.send_signal(sig)
    out, err = stopper.communicate(timeout=30)
    deadline = time.monotonic() + 5
    left = group_pids(rec.pgid)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = group_pids(rec.pgid)
    assert left == [], f"left running after an interrupted stop: {left}; stop said {out!r} {err!r}"
    assert stopper.returncode == 128 + int(sig), (stopper.returncode, out, err)
    assert "stopped" in out and f"finished the stop before acting on {signal.Signals(sig).name}" in err, (out, err)
