"""A remote member whose ``status --json`` names a log path that is not a file name
(``"/tmp/.."``) is one member with a reason, never a crash of the fleet (trust round 4 item
5: ``IsADirectoryError`` from joining the mirror dir with ``..``); mirrors are private (0600).
Real ssh to the test sshd; the host's CLI is this checkout's, its status answer rewritten."""

from __future__ import annotations

import os
import stat
import sys
import textwrap

import pytest

from server_control.fleet.remote import RemoteRun
from server_control.fleet.spec import MemberSpec
from tests.fleet.conftest import sshd  # noqa: F401 (fixture)
from tests.runs.conftest import groups, make_profile, state_dir  # noqa: F401 (fixtures)
from tests.support.cli import cli
from tests.support.sim import REPO_ROOT, free_port

pytestmark = pytest.mark.ssh

WRAPPER = textwrap.dedent("""
    import json, subprocess, sys
    out = subprocess.run([sys.executable, "-m", "console", *sys.argv[2:]], capture_output=True, text=True)
    text = out.stdout
    if sys.argv[2] == "status" and "--json" in sys.argv and sys.argv[1] != "-":
        body = json.loads(text)
        body["run"]["log_path"] = sys.argv[1]
        text = json.dumps(body)
    sys.stdout.write(text)
    sys.exit(out.returncode)
""")


def _member(sshd, tmp_path, profile, state, log_path: str) -> MemberSpec:  # noqa: F811
    wrapper = tmp_path / "host_cli.py"
    wrapper.write_text(WRAPPER)
    return MemberSpec(
        name="r",
        kind="ssh",
        profile_ref=str(profile),
        host=sshd.host,
        ssh_options=tuple(sshd.ssh_options),
        command=(sys.executable, str(wrapper), log_path),
        env=(("PYTHONPATH", str(REPO_ROOT)), ("SPECCONSOLE_STATE_DIR", str(state))),
    )


async def test_a_bad_remote_log_path_is_a_reason_not_a_crash(sshd, tmp_path, make_profile, state_dir, groups):  # noqa: F811
    profile = make_profile(name="rl")
    res = cli("launch", "--profile", str(profile), "--wait", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        mirrors = tmp_path / "mirrors"
        bad = RemoteRun(_member(sshd, tmp_path, profile, state_dir, "/tmp/.."), free_port(), mirrors)
        try:
            await bad.refresh()
            assert bad.error is not None and "bad log path '/tmp/..'" in bad.error, bad.error
            assert not mirrors.exists() or not any(mirrors.iterdir())
        finally:
            await bad.close()
        good = RemoteRun(_member(sshd, tmp_path, profile, state_dir, "-"), free_port(), mirrors)
        try:
            await good.refresh()
            assert good.error is None, good.error
            mirror = good.log_path()
            assert mirror is not None and stat.S_IMODE(os.stat(mirror).st_mode) == 0o600
        finally:
            await good.close()
    finally:
        stopped = cli("stop", "--profile", str(profile))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped" in stopped.stdout
