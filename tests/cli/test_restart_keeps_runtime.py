"""Headless `restart` keeps what was changed at runtime (issue 23 item 4): N=7 set with
`specconsole threshold` came back as the profile's 5 after `specconsole restart`, with no
re-apply in the journal, while the console's `r` kept it. Real CLI processes, a real
simulator run (its group killed at teardown by the run fixtures)."""

from __future__ import annotations

import json

from server_control.state import journal
from tests.support.cli import cli


def test_restart_reapplies_the_runtime_threshold(make_profile, groups, state_dir):
    path = make_profile("rk", tp=2)
    r = cli("launch", "--profile", str(path), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("threshold", "7", "--profile", str(path))
    assert r.returncode == 0 and r.stdout.startswith("applied"), r.stdout + r.stderr
    r = cli("restart", "--profile", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "re-applied runtime settings after the restart: threshold 7 (profile" in r.stdout, r.stdout
    snap = json.loads(cli("status", "--profile", str(path), "--json").stdout)
    assert snap["spec"]["threshold"] == 7, snap["spec"]  # before: 5, the profile's
    assert snap["run"]["runtime"] == {"speculative_disable_batch_threshold": 7}
    reapplied = [e for e in journal.read(state_dir) if e.action == "reapply"]
    assert reapplied and reapplied[-1].new == 7 and reapplied[-1].result == "applied"
