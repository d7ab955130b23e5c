"""Headless commands find the demo's run (issue 14 item 8): `status`, `threshold`, `verify`
and `stop` take `--demo` (and, with no target at all, look there); every connection error
names the URL and how to choose another; `--help` texts say what each command does."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from console.cli.demo_target import demo_state_dir, demo_target
from server_control.host.ports import free_port
from server_control.supervision.supervisor import Supervisor
from tests.support import command_forkserver


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return command_forkserver.run(args, timeout=timeout)


def test_status_threshold_verify_stop_find_the_demo_on_another_port(state_dir, groups):
    """Before: after `specconsole demo`, these probed :30000 and said UNREACHABLE."""
    target = demo_target(demo_state_dir(), port=free_port())
    profile = dataclasses.replace(target.profile, sim={**target.profile.sim, "max_lifetime": 120.0, "time_scale": 20.0})
    rec = asyncio.run(Supervisor(profile, state_dir=target.state_dir).launch())
    groups.add(rec.pgid)
    assert target.state_dir == state_dir / "demo"
    r = cli("verify", "--demo", "--wait", "60", "--json")
    assert json.loads(r.stdout)["layers"][0]["status"] == "pass", r.stdout + r.stderr
    r = cli("status", "--json")  # no target: the demo's run
    snap = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert snap["url"] == f"http://127.0.0.1:{rec.port}" and snap["run"]["pid"] == rec.pid
    r = cli("advise", "--demo", "--json")  # the run's port, not the profile's
    assert r.returncode == 0 and json.loads(r.stdout)["url"] == f"http://127.0.0.1:{rec.port}", r.stdout + r.stderr
    r = cli("threshold", "8", "--demo")
    assert r.returncode == 0 and r.stdout.startswith("applied"), r.stdout + r.stderr
    assert "[True]" not in r.stdout and "ranks" in r.stdout  # "on 1/1 DP ranks", not a repr
    r = cli("stop", "--demo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not rec.is_live()


def test_connection_errors_name_the_url_and_the_way_to_choose(state_dir):
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("status", "--url", url), ("threshold", "8", "--url", url), ("verify", "--url", url)):
        r = cli(*args)
        out = r.stdout + r.stderr
        assert r.returncode != 0, args
        assert url in out and "--url" in out and "--demo" in out, (args, out)


def test_help_texts(tmp_path):
    r = cli("sim", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: specconsole sim"), r.stdout[:200]
    stop = cli("stop", "--help").stdout
    assert "--wait" not in stop and "Exit codes" in stop
    assert "--wait timed out" in cli("launch", "--help").stdout


@pytest.mark.sglang  # the venv's dry run asks the real SGLang's parser (a fresh interpreter imports sglang: ~7 CPU-s)
def test_dry_run_checks_that_the_interpreter_can_import_sglang(tmp_path, state_dir):
    no_site = tmp_path / "python-without-site"  # the venv's interpreter without site-packages
    no_site.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    no_site.chmod(no_site.stat().st_mode | stat.S_IXUSR)
    for name, python in (("bare", no_site), ("venv", sys.executable)):
        (tmp_path / f"{name}.toml").write_text(
            f'name = "{name}"\n[server]\nkind = "sglang"\npython = "{python}"\nmodel_path = "m"\n'
            f'port = {free_port()}\n[speculative]\nalgorithm = ""\n'
        )
    bare = cli("launch", "--dry-run", "--profile", str(tmp_path / "bare.toml"))
    assert bare.returncode == 0 and "cannot import sglang" in bare.stderr, bare.stderr
    venv = cli("launch", "--dry-run", "--profile", str(tmp_path / "venv.toml"))
    assert venv.returncode == 0 and "sglang" not in venv.stderr, venv.stderr
    assert "# sglang 0.5.23" in venv.stdout


def test_demo_without_a_run_says_so_and_probes_nothing(state_dir):
    """Issue 23 item 1: with no demo run, `status --demo` and `threshold --demo` probed a
    port picked for a run that is not there (30000, or a random free one)."""
    for args in (
        ("status", "--demo"),
        ("threshold", "--demo"),
        ("threshold", "7", "--demo"),
        ("verify", "--demo"),
        ("advise", "--demo"),
    ):
        r = cli(*args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "no demo run in" in r.stderr and "specconsole demo" in r.stderr, (args, r.stderr)
        assert "127.0.0.1" not in r.stdout + r.stderr, (args, r.stdout, r.stderr)


def test_demo_without_a_run_answers_json_on_stdout_with_json(state_dir):
    """`status --json`, `threshold --json` and `setting --json` with no demo run printed
    nothing on stdout (the reason on stderr only): a script reading the JSON got no answer."""
    for args in (("status",), ("threshold",), ("threshold", "7"), ("setting", "force"), ("advise", "--demo")):
        r = cli(*args, "--json")
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        answer = json.loads(r.stdout)
        assert answer["running"] is False and "no demo run in" in answer["error"], (args, answer)
        assert "no demo run in" in r.stderr, (args, r.stderr)


def test_status_of_a_run_stopped_on_purpose_says_not_running(state_dir, sim_profile):
    """Issue 23 item 10: exit 1 and a hint to pass `--demo`; now: exit 3, "not running"."""
    r = cli("status", "--profile", str(sim_profile), "--state-dir", str(state_dir))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "is not running (stopped" in r.stderr and "--demo" not in r.stderr, r.stderr


def test_demo_help_says_what_quitting_does():
    """Issue 23 item 4: `demo --help` said quitting defaults to stopping (Enter leaves it running)."""
    text = " ".join(cli("demo", "--help").stdout.split())
    assert "Enter leaves it running" in text and '"stop it" as the default' not in text


def test_logs_of_the_demo_and_of_a_profile(state_dir):
    """Issue 23 item 8: `specconsole logs --demo|--profile P [-f]` like the other commands
    (before: rc 2, and with no FILE it looked where the demo does not write)."""
    target = demo_target(demo_state_dir(), port=free_port())
    profile = dataclasses.replace(target.profile, sim={**target.profile.sim, "max_lifetime": 120.0, "time_scale": 20.0})
    rec = asyncio.run(Supervisor(profile, state_dir=target.state_dir).launch())
    follow = None
    try:
        init = "Dynamic speculation disable enabled"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and init not in open(rec.log_path, errors="replace").read():
            time.sleep(0.2)
        r = cli("logs", "--demo")
        assert r.returncode == 0 and init in r.stdout, r.stdout[-500:] + r.stderr
        r = cli("logs")  # no FILE: the demo's log is found too
        assert r.returncode == 0 and init in r.stdout, r.stderr
        r = cli("logs", "--demo", "--kind", "spec_init", "--parse", "--json")
        assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["kind"] == "spec_init"
        follow = subprocess.Popen(
            [sys.executable, "-m", "console", "logs", "--demo", "-f", "--kind", "decode"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        line = follow.stdout.readline()
        assert "Decode batch" in line, line
        follow.send_signal(signal.SIGTERM)
        follow.communicate(timeout=20)  # drained: a full pipe would block its writes
        assert follow.returncode == 0
    finally:
        if follow is not None and follow.poll() is None:
            follow.kill()
        subprocess.run([sys.executable, "-m", "console", "stop", "--demo"], capture_output=True, timeout=60, env=dict(os.environ))
    r = cli("logs", "--demo", "--kind", "spec_init")  # stopped: the last run's log still reads
    assert r.returncode == 0 and "Dynamic speculation disable enabled" in r.stdout, r.stderr
