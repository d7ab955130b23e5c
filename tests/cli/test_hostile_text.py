"""Text a server controls never reaches the terminal raw. A stand-in server puts CSI, OSC
(title, OSC 52 clipboard, OSC 8 hyperlink), DCS and C1 sequences in everything it says
(/server_info fields, its log lines, its refusal reason) and a crashing "server" prints
them before it exits: every output surface shows the visible text and no sequence."""

from __future__ import annotations

import json
import os
import stat

from tests.control.conftest import start_stand
from tests.control.stock_server import HOSTILE, VISIBLE
from tests.support.cli import cli, start_cli
from tests.support.hostile import assert_clean
from tests.support.wait import wait_for


def strings(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)
    elif isinstance(obj, str):
        yield obj


def test_status_threshold_verify_and_logs_show_no_sequence(tmp_path, state_dir):
    stand = start_stand(tmp_path, "hostile")
    try:
        wait_for(lambda: stand.log_path.read_bytes().count(b"Unterminated") >= 3, what="the hostile log lines")
        target = ("--url", stand.url, "--log", str(stand.log_path))
        status = cli("status", *target)
        assert_clean(status.stdout + status.stderr, "status")
        assert f"model-{VISIBLE}" in status.stdout and f"v-{VISIBLE}" in status.stdout, status.stdout
        as_json = cli("status", "--json", *target)
        for s in strings(json.loads(as_json.stdout)):
            assert_clean(s, "status --json")
        refused = cli("threshold", "8", *target)
        assert_clean(refused.stdout + refused.stderr, "threshold 8")
        assert "refused" in refused.stdout and VISIBLE in refused.stdout, refused.stdout
        for args in (("threshold", *target), ("verify", *target)):
            r = cli(*args)
            assert_clean(r.stdout + r.stderr, " ".join(args[:1]))
        logs = cli("logs", str(stand.log_path))
        assert_clean(logs.stdout + logs.stderr, "logs")
        assert f"#new-seq: 1, {VISIBLE}" in logs.stdout
    finally:
        stand.stop()


def crashing_server(tmp_path) -> str:
    """An interpreter stand-in that prints the hostile lines (one OSC left open) and exits 3."""
    payload = tmp_path / "payload"
    payload.write_bytes((f"starting {HOSTILE}\nopen title \x1b]0;{HOSTILE}\nTraceback: {HOSTILE}\n").encode())
    script = tmp_path / "hostile-python"
    script.write_text(f"#!/bin/sh\ncat {payload}\nexit 3\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_launch_wait_and_supervise_fatal_tails_show_no_sequence(tmp_path, make_profile, groups):
    path = make_profile("hostile", tp=1, burst=1)
    path.write_text(path.read_text().replace(f'python = "{os.sys.executable}"', f'python = "{crashing_server(tmp_path)}"'))
    launched = cli("launch", "--profile", str(path), "--wait", "30")
    assert launched.returncode == 1, launched.stdout + launched.stderr
    assert_clean(launched.stdout + launched.stderr, "launch --wait")
    assert f"Traceback: {VISIBLE}" in launched.stderr, launched.stderr
    sup = start_cli("supervise", "--profile", str(path), groups=groups)
    out = sup.communicate(timeout=60)[0]
    assert sup.returncode == 1 and "FATAL" in out, out
    assert_clean(out, "supervise FATAL")
    assert f"Traceback: {VISIBLE}" in out


def test_dry_run_shows_a_hostile_profile_path_without_its_sequences(tmp_path, state_dir):
    """A directory named with an escape sequence (OSC title) printed raw by --dry-run."""
    odd = tmp_path / "p\x1b]0;owned\x07dir"
    odd.mkdir()
    profile = odd / "t.toml"
    profile.write_text('name = "t"\n[server]\nkind = "sim"\nport = 1\n')
    res = cli("launch", "--profile", str(profile), "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert "# profile t (" in res.stdout and "pdir/t.toml)" in res.stdout  # the OSC (its text too) gone
