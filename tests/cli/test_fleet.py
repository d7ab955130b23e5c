"""`specconsole fleet ...` and `specconsole demo --fleet`, as an operator runs them."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

import pytest

from console.cli.fleet import demo_app
from console.dialogs.confirm import ChoiceScreen
from console.fleet.screen import FleetScreen
from server_control.config.profile import load_profile
from server_control.state.runs import list_records
from tests.console.screen_text import wait_for
from tests.fleet.conftest import remote_member, sshd, write_profile  # noqa: F401 (fixture)
from tests.support import command_forkserver
from tests.support.sim import REPO_ROOT, free_port, group_pids


def cli(*args, state_dir, timeout=120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECCONSOLE_STATE_DIR": str(state_dir)}
    return command_forkserver.run(args, env=env, timeout=timeout)


def test_bad_fleet_file_and_unknown_member_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[members.r1]\nurl = "ftp://x"\n')
    res = cli("fleet", "status", "--fleet", str(bad), state_dir=tmp_path)
    assert res.returncode == 2 and f"{bad}: [members.r1] url: must be an http" in res.stderr
    res = cli("fleet", "verify", "--fleet", "example", "--members", "node2,zz", state_dir=tmp_path)
    assert res.returncode == 2 and "--members: no member 'zz'" in res.stderr
    res = cli("fleet", "threshold", "5", "--force", "auto", "--fleet", "example", state_dir=tmp_path)
    assert res.returncode == 2 and "give either N or --force MODE, not both" in res.stderr


def test_fleet_threshold_without_n_reads(tmp_path, sim_factory):
    """Issue 23 item 10: `fleet threshold` without N was rc 2 while `threshold` without N reads."""
    sim = sim_factory(tp=1, threshold=6)
    sim.wait_ready()
    fleet = tmp_path / "one.toml"
    fleet.write_text(f'name = "one"\n[members.s]\nurl = "{sim.url}"\ngateway = false\n')
    res = cli("fleet", "threshold", "--fleet", str(fleet), "--json", state_dir=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    member = json.loads(res.stdout)["members"][0]
    assert member["member"] == "s" and member["data"]["threshold"] == 6, member


@pytest.mark.ssh
def test_headless_fleet_launch_status_steer_verify_stop(sshd, tmp_path):  # noqa: F811
    fleet = tmp_path / "f.toml"
    remote = remote_member(sshd, write_profile(tmp_path, "hc", traffic="wave:10:20"), tmp_path / "remote")
    # where the gateway reaches it: each command's own ssh tunnel ends with the command
    worker_url = load_profile(remote["profile"]).url
    fleet.write_text(f'''name = "cli"
poll_interval_s = 0.25
[gateway]
port = {free_port()}
stop_grace_s = 4
[members.a]
profile = "{write_profile(tmp_path, "ha", traffic="wave:10:20")}"
[members.c]
host = "{remote["host"]}"
profile = "{remote["profile"]}"
ssh_options = {json.dumps(remote["ssh_options"])}
command = {json.dumps(remote["command"])}
env = {{ {", ".join(f'{k} = "{v}"' for k, v in remote["env"].items())} }}
worker_url = "{worker_url}"
''')
    local = tmp_path / "local"
    res = cli("fleet", "launch", "--fleet", str(fleet), "--json", state_dir=local)
    body = json.loads(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [(m["member"], m["outcome"]) for m in body["members"]] == [("a", "ok"), ("c", "ok"), ("gateway", "ok")]
    try:
        res = cli("fleet", "status", "--fleet", str(fleet), "--json", state_dir=local)
        body = json.loads(res.stdout)
        assert res.returncode == 0 and body["gateway"]["state"] == "ready", res.stdout
        assert sorted(w["member"] for w in body["gateway"]["workers"] if w["healthy"]) == ["a", "c"]
        # smg's own counters, one read: the rate since smg started (nothing was sent through it)
        traffic = body["gateway"]["traffic"]
        assert traffic["error"] is None and traffic["requests_total"] == 0 and traffic["req_s"] == 0, traffic
        assert traffic["window_s"] > 0
        rows = {m["member"]: m["data"] for m in body["members"]}
        assert rows["c"]["kind"] == "ssh" and rows["c"]["host"] == sshd.host and rows["c"]["reachable"]
        res = cli("fleet", "threshold", "8", "--fleet", str(fleet), "--members", "c", state_dir=local)
        assert res.returncode == 0 and res.stdout.startswith("c ") and "read back on" in res.stdout
        res = cli("fleet", "threshold", "-1", "--fleet", str(fleet), "--json", state_dir=local)
        assert res.returncode == 2 and "must be >= 0, got -1" in res.stderr  # refused before any member
        assert json.loads(res.stdout)["exit"] == 2 and "must be >= 0, got -1" in json.loads(res.stdout)["error"]
        res = cli("fleet", "verify", "--fleet", str(fleet), "--wait", "30", "--json", state_dir=local)
        assert res.returncode in (0, 3), res.stdout
        assert {m["data"]["summary"] for m in json.loads(res.stdout)["members"]} <= {"pass", "pending"}
    finally:
        pgids = [r.pgid for r in list_records(local)] + [r.pgid for r in list_records(tmp_path / "remote")]
        res = cli("fleet", "stop", "--fleet", str(fleet), state_dir=local)
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(pgids) == 3 and all(group_pids(pg) == [] for pg in pgids)


@pytest.mark.xdist_group("demo_fleet_ports")  # the shipped ports when free: one worker at a time
async def test_demo_fleet_sends_traffic_through_the_gateway_and_stops_on_quit(tmp_path):
    args = argparse.Namespace(state_dir=str(tmp_path / "demo"), time_scale=5.0, keep=False, no_mouse=True)
    app, traffic = demo_app(args)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_for(
            pilot,
            lambda: "launch on 5: 5 ok" in str(app.fleet_screen.query_one("#fleet-results").render()),
            "the demo fleet launched",
            90,
        )
        await wait_for(pilot, lambda: traffic.sent >= 8, "traffic through the gateway", 60)
        gw = app.fleet.gateway_status
        assert gw is not None and gw.healthy_workers == 4

        # the gateway's own counters saw that traffic (they are read once a poll), and the aggregate says so
        def counted():
            t = app.fleet.gateway_status.traffic
            return t is not None and t.requests_total >= 8 and (t.req_s or 0) > 0

        await wait_for(pilot, counted, "smg's own counters saw the traffic", 10)

        # the screen paints on its own timer, so the line follows the counters within a tick
        # (asserted at once, a loaded run read the line painted from the poll before: smg's
        # /metrics had missed its 2 s deadline there, "metrics unavailable (ReadTimeout ...)")
        def painted():
            return "req/s" in str(app.fleet_screen._aggregate) and "p50 " in str(app.fleet_screen._aggregate)

        await wait_for(pilot, painted, "the aggregate line says the gateway's traffic", 10)
        modes = {str(app.fleet_screen.last_rows[m]["mode"]) for m in app.fleet_screen.order}  # a stale row's cell is a dim Text
        assert isinstance(app.screen, FleetScreen) and len(app.fleet_screen.order) == 4 and modes
        pgids = [r.pgid for r in list_records(tmp_path / "demo")]
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)  # the demo's q confirms that it stops everything
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.return_code is not None, "exit", 60)
    assert len(pgids) == 5 and all(group_pids(pg) == [] for pg in pgids)
    assert not list_records(tmp_path / "demo")


def test_fleet_status_of_a_member_stopped_on_purpose_is_not_a_failure(tmp_path):
    """Issue 23 item 10: `fleet status` exited 1 for members stopped on purpose."""
    fleet = tmp_path / "stopped.toml"
    fleet.write_text(f'name = "stopped"\n[members.a]\nprofile = "{write_profile(tmp_path, "st", tp=1)}"\n')
    res = cli("fleet", "status", "--fleet", str(fleet), "--json", state_dir=tmp_path / "state")
    assert res.returncode == 0, res.stdout + res.stderr
    member = json.loads(res.stdout)["members"][0]
    assert member["outcome"] == "ok" and member["data"]["state"] == "stopped", member


def test_fleet_status_as_text_prints_its_table(tmp_path):
    """`fleet status` (text) crashed with KeyError: 'trend': the screen's sparkline column
    has no text cell. The header and one row per member, no traceback."""
    fleet = tmp_path / "text.toml"
    fleet.write_text(f'name = "text"\n[members.a]\nprofile = "{write_profile(tmp_path, "tx", tp=1)}"\n')
    res = cli("fleet", "status", "--fleet", str(fleet), state_dir=tmp_path / "state")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["MEMBER", "HOST", "STATE"] and "TREND" not in lines[0]
    assert lines[1].split()[0] == "a" and "stopped" in lines[1]


def test_a_bad_n_or_mode_to_the_fleet_is_one_line_and_exit_2_as_for_one_server(tmp_path):
    """Issue 35 item 7: a bad N gave one `refused` line per member and exit 1."""
    for args in (("abc",), ("99999",), ("-1",), ("--force", "sideways")):
        res = cli("fleet", "threshold", *args, "--fleet", "demo", state_dir=tmp_path)
        assert res.returncode == 2 and res.stdout == "", (args, res.stdout)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("specconsole: refused: ") and args[-1] in lines[0], (args, lines)


@pytest.mark.xdist_group("demo_fleet_ports")  # the shipped ports when free: one worker at a time
def test_fleet_demo_reaches_the_demo_fleet_headless_as_text_and_json(tmp_path):
    """Issue 35: the headless fleet commands could not find the demo fleet (no `--demo`;
    every member "failed" without an undocumented --state-dir). Nothing running, then the
    demo fleet launched headless, steered, read and stopped with `--demo` alone."""
    state = tmp_path / "state"
    res = cli("fleet", "status", "--demo", state_dir=state)
    assert res.returncode == 0, res.stderr
    assert [ln.split()[:3] for ln in res.stdout.splitlines()[1:5]] == [[f"replica{i}", "local", "stopped"] for i in range(1, 5)]
    assert cli("fleet", "status", "--demo", "--fleet", "demo", state_dir=state).returncode == 2
    pgids = []
    try:
        res = cli("fleet", "launch", "--demo", "--json", state_dir=state)
        pgids = [r.pgid for r in list_records(state / "demo")]
        assert res.returncode == 0, res.stdout + res.stderr
        assert len(pgids) == 5  # four members and the gateway, in <state>/demo
        res = cli("fleet", "threshold", "6", "--demo", state_dir=state)
        assert res.returncode == 0 and res.stdout.count(" ok ") == 4, res.stdout + res.stderr
        body = json.loads(cli("fleet", "status", "--demo", "--json", state_dir=state).stdout)
        assert body["fleet"] == "demo-fleet" and len(body["members"]) == 4
        assert all(m["outcome"] == "ok" and m["data"]["state"] == "ready" for m in body["members"]), body["members"]
        assert body["gateway"]["state"] == "ready"
    finally:
        res = cli("fleet", "stop", "--demo", state_dir=state)
    assert res.returncode == 0, res.stdout + res.stderr
    assert all(group_pids(pg) == [] for pg in pgids)
