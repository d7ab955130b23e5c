"""The system ssh client against a real sshd on 127.0.0.1, running this checkout's CLI."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx
import psutil
import pytest

from server_control.fleet.spec import MemberSpec
from server_control.fleet.ssh import SshHost
from tests.support.sim import free_port, start_sim

pytestmark = pytest.mark.ssh


@pytest.fixture
def member(sshd, tmp_path):
    return MemberSpec(
        name="r",
        kind="ssh",
        profile_ref="demo",
        host=sshd.host,
        ssh_options=tuple(sshd.ssh_options),
        command=tuple(sshd.remote_command),
        env=tuple(sshd.remote_env(tmp_path / "remote-state").items()),
    )


def _procs_with(text: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        if any(text in part for part in p.info["cmdline"] or ()):
            out.append(p)
    return out


async def test_run_gives_the_remote_answer_or_says_no_answer(member, tmp_path):
    host = SshHost(member)
    try:
        res = await host.run("launch", "--profile", "demo", "--dry-run", "--json", timeout_s=60)
        assert res.rc == 0 and not res.no_answer
        assert res.json()["argv"][1:3] == ["-m", "server_control.sim"]
        assert res.argv[0] == "ssh" and res.argv[-1].endswith("-m console launch --profile demo --dry-run --json")
        bad = await host.run("launch", "--profile", str(tmp_path / "nope.toml"), timeout_s=60)
        assert bad.rc == 2 and not bad.no_answer and "cannot read profile" in bad.why()
    finally:
        await host.close()
    check = await asyncio.create_subprocess_exec(
        "ssh", *host._options(True), "-O", "check", member.host, stderr=asyncio.subprocess.DEVNULL
    )
    assert await check.wait() != 0, "close() ends the shared master connection"
    closed = SshHost(
        dataclasses.replace(member, ssh_options=(*member.ssh_options[:2], "-p", str(free_port()), *member.ssh_options[4:]))
    )
    res = await closed.run("status", timeout_s=30)
    assert res.rc == 255 and res.no_answer and res.why().startswith("ssh failed")


async def test_stream_mirrors_and_its_remote_command_ends_with_the_connection(member, tmp_path):
    log = tmp_path / "server-1.log"
    log.write_text("[2026-11-30 10:00:00] first line\n")
    mirror = tmp_path / "mirror" / "server-1.log"
    host = SshHost(member)
    try:
        proc = await host.stream(["logs", "--follow", str(log)], mirror)
        for _ in range(200):
            if "first line" in (mirror.read_text() if mirror.exists() else ""):
                break
            await asyncio.sleep(0.05)
        with log.open("a") as f:
            f.write("[2026-11-30 10:00:01] second line\n")
        for _ in range(100):
            if "second line" in mirror.read_text():
                break
            await asyncio.sleep(0.05)
        assert mirror.read_text().splitlines() == ["[2026-11-30 10:00:00] first line", "[2026-11-30 10:00:01] second line"]
        remote = [p for p in _procs_with(str(log)) if "logs" in p.cmdline() and p.pid != proc.pid]
        assert remote, "the remote `specconsole logs --follow` runs"
        await host.stop_stream(proc)
        gone, alive = psutil.wait_procs(remote, timeout=10)
        assert not alive, f"remote command outlived its connection: {[p.cmdline() for p in alive]}"
    finally:
        await host.close()


async def test_a_flooding_stream_is_rotated_and_capped_and_private(member, tmp_path):
    """A host's log flooding its mirror (one reached 909 MB in 45 s) is written through the
    run logs' writer: parts of ``part_bytes``, ``keep`` old ones, mode 0600."""
    log = tmp_path / "server-1.log"
    log.write_text("[2026-11-30 10:00:00] first line\n")
    mirror = tmp_path / "mirror" / "server-1.log"
    part, total = 64 * 1024, 0
    host = SshHost(member)
    try:
        proc = await host.stream(["logs", "--follow", str(log)], mirror, part_bytes=part, keep=1)
        for _ in range(200):
            if "first line" in (mirror.read_text() if mirror.exists() else ""):
                break
            await asyncio.sleep(0.05)
        with log.open("a") as f:
            for i in range(6000):  # ~0.9 MB: 14 parts' worth
                f.write(f"[2026-11-30 10:00:01] flood line {i:05d} " + "x" * 100 + "\n")
            f.write("[2026-11-30 10:00:02] the last line\n")
        for _ in range(600):
            if "the last line" in mirror.read_text():
                break
            await asyncio.sleep(0.05)
        assert "the last line" in mirror.read_text()
        await host.stop_stream(proc)
    finally:
        await host.close()
    parts = sorted(mirror.parent.iterdir())
    assert [p.name for p in parts] == ["server-1.log", "server-1.log.1"]  # keep=1: one old part
    for p in parts:
        total += p.stat().st_size
        assert p.stat().st_size <= 2 * part, (p, p.stat().st_size)
        assert p.stat().st_mode & 0o777 == 0o600, oct(p.stat().st_mode)
    assert total <= 4 * part


async def test_tunnel_reaches_a_server_the_host_sees(member, tmp_path):
    with start_sim(tmp_path, "--sim-light", tp=1, lifetime=60) as sim:
        sim.wait_ready()
        host = SshHost(member)
        local = free_port()
        try:
            await host.tunnel(local, "127.0.0.1", sim.port)
            body = None
            for _ in range(100):
                try:
                    body = httpx.get(f"http://127.0.0.1:{local}/server_info", timeout=2).json()
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.1)
            assert body is not None and body["port"] == sim.port
        finally:
            await host.close()
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{local}/server_info", timeout=2)


OWNER = """
import asyncio, json, sys
from server_control.fleet.spec import MemberSpec
from server_control.fleet.ssh import SshHost

async def main():
    member = MemberSpec(**json.loads(sys.argv[1]))
    host = SshHost(member)
    tunnel = await host.tunnel(int(sys.argv[2]), "127.0.0.1", int(sys.argv[3]))
    print(tunnel.pid, flush=True)
    await asyncio.sleep(300)

asyncio.run(main())
"""


def test_a_tunnel_ends_when_its_owner_is_killed(member, tmp_path):
    """The fleet console killed with SIGKILL left ``ssh -N -L`` running with ppid 1 (trust
    round 4 item 6): any local user reached the remote control API through the operator's login."""
    import dataclasses
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from tests.support.sim import REPO_ROOT

    spec = {f.name: getattr(member, f.name) for f in dataclasses.fields(member)}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, json.dumps(spec), str(free_port()), "9"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
    )
    try:
        pid = int(owner.stdout.readline())
        assert psutil.pid_exists(pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)

        def running() -> bool:  # it may exit between any two looks: that is the awaited end
            try:
                return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return False

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and running():
            time.sleep(0.1)
        alive = running()
        if alive:
            os.kill(pid, signal.SIGKILL)
        assert not alive, "the tunnel outlived its owner"
    finally:
        if owner.poll() is None:
            owner.kill()


def test_the_session_sshd_outlives_a_whole_ci_run():
    """The sshd is one per test session, so its bounded lifetime must exceed a session's:
    at 900 s a slow CI run lost it before test_ssh.py ran ("Connection refused")."""
    from tests.support import sshd as test_sshd

    assert test_sshd.LIFETIME_S > test_sshd.CI_LIMIT_S
