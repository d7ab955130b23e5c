"""The smaller items of issue 22 (item 12): logs/ is 0700, bidi controls never reach the
terminal, a remote answer that is not JSON is "no JSON answer" (real ssh, the test sshd)."""

from __future__ import annotations

import stat

import pytest

from server_control.fleet.remote import RemoteRun
from server_control.fleet.spec import MemberSpec
from server_control.sanitize import clean_bytes, clean_json, strip_controls
from server_control.state import runs
from tests.fleet.conftest import sshd  # noqa: F401 (fixture)
from tests.support.trust import cli, port_of, run_pids

BIDI = "\u202e\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_bidi_controls_are_removed_everywhere():
    text = f"model{BIDI}/path"
    assert strip_controls(text) == "model/path"
    assert clean_bytes(text.encode()) == "model/path"
    assert clean_json({"model_path": text, text: [text]}) == {"model_path": "model/path", "model/path": ["model/path"]}
    assert strip_controls("naïve 模型 ok") == "naïve 模型 ok"


def test_the_logs_directory_is_private(make_profile, state_dir, groups):
    profile = make_profile(name="lg")
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    groups.add(runs.load_record("lg").pgid)
    try:
        for d in (state_dir / "logs", state_dir / "logs" / "lg"):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, f"{d}: {oct(d.stat().st_mode)}"
    finally:
        assert cli("stop", "--profile", str(profile)).returncode == 0
        assert not run_pids(port_of(profile))


@pytest.mark.ssh
async def test_a_remote_status_that_is_not_json_says_so(sshd, tmp_path):
    member = MemberSpec(
        name="g", kind="ssh", profile_ref="demo", host=sshd.host, ssh_options=tuple(sshd.ssh_options), command=("echo", "garbage")
    )
    run = RemoteRun(member, 0, tmp_path / "mirror")
    try:
        await run.refresh()
        assert run.error == f"{sshd.host}: no JSON answer (exit 0)"
        out = run._result("stop", await run.ssh.run("stop", timeout_s=30))
        assert out.outcome == "failed" and "no JSON answer" in out.message
    finally:
        await run.ssh.close()


async def test_a_gateway_whose_port_is_taken_says_the_members_are_left_running(tmp_path, state_dir):
    import socket

    from server_control.fleet.fleet import Fleet
    from server_control.fleet.spec import parse_fleet
    from tests.fleet.conftest import write_profile

    member = write_profile(tmp_path, "gm", lifetime=60)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    spec = parse_fleet(
        {"name": "gwbusy", "gateway": {"port": busy.getsockname()[1]}, "members": {"a": {"profile": str(member)}}},
        tmp_path / "f.toml",
    )
    fleet = Fleet(spec, state_dir, supervise=False)
    await fleet.start()
    try:
        results = {r.member: r for r in await fleet.act("launch", wait_s=60)}
        assert results["a"].outcome == "ok", results["a"].detail
        gw = results["gateway"]
        assert gw.outcome == "failed"
        assert "the members launched (a) are left running without the gateway" in gw.detail, gw.detail
    finally:
        stopped = await fleet.act("stop")
        await fleet.close()
        busy.close()
    assert all(r.outcome == "ok" for r in stopped if r.member == "a")
    assert not run_pids(int(next(x.split("=")[1] for x in member.read_text().splitlines() if x.startswith("port"))))
