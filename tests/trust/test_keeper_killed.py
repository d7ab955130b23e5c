"""The keeper killed (issue 22 item 4): the server serves on, but its log stops growing and
its exit code is lost; `status` says so instead of a plain "ready"."""

from __future__ import annotations

import os
import signal
import time

from server_control.state import runs
from tests.support.trust import cli, port_of, run_pids


def test_status_says_the_keeper_is_gone(make_profile, state_dir, groups):
    profile = make_profile(name="kk")
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    rec = runs.load_record("kk")
    groups.add(rec.pgid)
    assert rec.keeper_pid and rec.keeper_ticks is not None and not rec.keeper_gone()
    status = cli("status", "--profile", str(profile))
    assert "keeper is gone" not in status.stdout + status.stderr
    os.kill(rec.keeper_pid, signal.SIGKILL)
    time.sleep(0.3)
    assert rec.keeper_gone()
    status = cli("status", "--profile", str(profile))
    said = status.stdout + status.stderr
    assert f"the run's keeper is gone (pid {rec.keeper_pid}) while the server runs" in said, said
    assert "blind" in said
    res = cli("stop", "--profile", str(profile))
    assert res.returncode == 0, res.stdout + res.stderr
    assert not run_pids(port_of(profile))
