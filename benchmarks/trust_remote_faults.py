"""Trust round 4 (issue 37), the faults from across the wire, each against real processes: a
remote member naming a bad log path (item 5) and ssh outliving its owner (6) through the
test sshd (tests/support/sshd.py, a real OpenSSH on 127.0.0.1), a flooding remote log's
mirror (7), a trickling server under ``advise`` (8), a malformed ``/server_info`` under
``threshold --url`` (10), and a 1000-member ``fleet status --json`` (14)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from server_control.host.ports import free_port
from tests.support.sshd import Sshd, sshd_available, start_sshd

if TYPE_CHECKING:
    from benchmarks.trust_audit import Audit

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "support" / "hostile_http.py"
# the host's CLI, its `status --json` answer given a log path of argv[1]'s choosing
BAD_LOG = """import json, subprocess, sys
out = subprocess.run([sys.executable, "-m", "console", *sys.argv[2:]], capture_output=True, text=True)
text = out.stdout
if sys.argv[2] == "status" and "--json" in sys.argv:
    body = json.loads(text); body["run"]["log_path"] = sys.argv[1]; text = json.dumps(body)
sys.stdout.write(text); sys.exit(out.returncode)
"""
# a host whose CLI never stops talking; it notes its pid so the audit can check it ended
ENDLESS = """import os, sys
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
line = b"x" * 4095 + b"\\n"
while True:
    os.write(1, line)
"""


def _member_toml(name: str, sshd: Sshd, profile: Path, command: list[str], state: Path) -> str:
    return (
        f'[members.{name}]\nhost = "{sshd.host}"\nprofile = "{profile}"\n'
        f"ssh_options = {json.dumps(sshd.ssh_options)}\ncommand = {json.dumps(command)}\n"
        f'env = {{ PYTHONPATH = "{REPO}", SPECCONSOLE_STATE_DIR = "{state}" }}\n'
    )


def _watched(audit: Audit, argv: list[str], timeout_s: float) -> tuple[int, str, float]:
    """Run ``argv``, noting its process tree (the ssh it starts) every 0.1 s while it runs."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b""), daemon=True)
    reader.start()
    while proc.poll() is None and time.monotonic() - t0 < timeout_s:
        audit.pids.note_tree(proc.pid, f"{argv[3]} {argv[4]}")
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    reader.join(10)
    return proc.returncode, b"".join(out).decode(errors="replace"), time.monotonic() - t0


def bad_remote_log_path(audit: Audit, sshd: Sshd) -> tuple[bool, str]:
    """Item 5: one member's status names ``/tmp/..`` as its log; ``fleet status`` must say
    that member's reason and answer for the other one."""
    path = audit.profile("remote5")
    audit.launch(path)
    wrapper = audit.root / "bad_log_cli.py"
    wrapper.write_text(BAD_LOG)
    fleet = audit.root / "fleet5.toml"
    fleet.write_text(
        'name = "r5"\n'
        + _member_toml("bad", sshd, path, [sys.executable, str(wrapper), "/tmp/.."], audit.state)
        + _member_toml("good", sshd, path, [sys.executable, "-m", "console"], audit.state)
    )
    rc, out, took = _watched(audit, [sys.executable, "-m", "console", "fleet", "status", "--fleet", str(fleet), "--json"], 120)
    try:
        rows = {m["member"]: m for m in json.loads(out)["members"]}
    except (ValueError, KeyError, TypeError):
        rows = {}
    bad_said = "bad log path" in json.dumps(rows.get("bad", {}))
    good_ok = bool(rows.get("good")) and "bad log path" not in json.dumps(rows.get("good"))
    ok, note = audit.stopped_clean(path)
    return ok and bad_said and good_ok and "Traceback" not in out, (
        f"fleet status exit {rc} in {took:.1f} s; bad member's reason said: {bad_said}; good member unaffected: {good_ok}; {note}"
    )


OWNER = """import asyncio, json, sys
from server_control.fleet.spec import MemberSpec
from server_control.fleet.ssh import SshHost
async def main():
    host = SshHost(MemberSpec(**json.loads(sys.argv[1])))
    tunnel = await host.tunnel(int(sys.argv[2]), "127.0.0.1", int(sys.argv[3]))
    print(tunnel.pid, flush=True)
    await asyncio.sleep(120)
asyncio.run(main())
"""


def tunnel_outlives_owner(audit: Audit, sshd: Sshd) -> tuple[bool, str]:
    """Item 6: the process holding an ``ssh -N -L`` tunnel (the fleet console's SshHost)
    SIGKILLed: the tunnel must end with it, not stay with ppid 1."""
    spec = {"name": "t", "kind": "ssh", "profile_ref": "x", "host": sshd.host, "ssh_options": sshd.ssh_options}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, json.dumps(spec), str(free_port()), str(free_port())],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    audit.pids.note(owner.pid, "tunnel owner")
    tunnel = int((owner.stdout.readline() if owner.stdout else "") or 0)
    audit.pids.note(tunnel, "ssh -N -L tunnel")
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and audit.pids.alive():
        time.sleep(0.1)
    left = audit.pids.alive()
    return tunnel > 0 and not left, f"tunnel pid {tunnel}; after the owner's SIGKILL still running: {left}"


def endless_remote(audit: Audit, sshd: Sshd) -> tuple[bool, str]:
    """Item 6: ``fleet status`` gives up on a host whose CLI never stops talking; the ssh it
    started and the remote command must end with it."""
    pidfile = audit.root / "endless.pids"
    script = audit.root / "endless_cli.py"
    script.write_text(ENDLESS)
    fleet = audit.root / "fleet6.toml"
    fleet.write_text(
        'name = "r6"\n'
        + _member_toml("loud", sshd, audit.root / "x.toml", [sys.executable, str(script), str(pidfile)], audit.state)
    )
    rc, out, took = _watched(audit, [sys.executable, "-m", "console", "fleet", "status", "--fleet", str(fleet), "--json"], 120)
    remote = [int(x) for x in pidfile.read_text().split()] if pidfile.exists() else []
    for pid in remote:
        audit.pids.note(pid, "endless remote CLI")
    audit.pids.note_tree(sshd.proc.pid, "sshd session")
    left = audit.pids.wait_gone(8.0)
    said = "too large" in out or "no answer" in out
    return said and not left and bool(remote), (
        f"fleet status exit {rc} in {took:.1f} s, said too large/no answer: {said}; remote pids {remote}; left {left}"
    )


def flooding_mirror(audit: Audit, sshd: Sshd) -> tuple[bool, str]:
    """Item 7, the mirror: a host's log flooding (6 MB) is mirrored through the run logs'
    writer (real ssh ``logs --follow``; parts of 256 KiB here, 64 MiB in the product)."""
    from server_control.fleet.spec import MemberSpec
    from server_control.fleet.ssh import SshHost

    log = audit.root / "flood.log"
    log.write_text("[2026-11-30 10:00:00] first line\n")
    mirror = audit.root / "mirror" / "flood.log"
    part = 256 * 1024
    member = MemberSpec(name="m", kind="ssh", profile_ref="x", host=sshd.host, ssh_options=tuple(sshd.ssh_options),
                        command=(sys.executable, "-m", "console"), env=(("PYTHONPATH", str(REPO)),))  # fmt: skip

    async def run() -> None:
        host = SshHost(member)
        try:
            proc = await host.stream(["logs", "--follow", str(log)], mirror, part_bytes=part, keep=1)
            audit.pids.note(proc.pid, "ssh log stream")
            for _ in range(400):  # `logs --follow` begins at the last lines: flood once it follows
                if mirror.exists() and "first line" in mirror.read_text(errors="replace"):
                    break
                await asyncio.sleep(0.05)
            with log.open("a") as f:
                for i in range(50_000):
                    f.write(f"[2026-11-30 10:00:01] flood line {i:06d} " + "x" * 100 + "\n")
                f.write("[2026-11-30 10:00:02] the last line\n")
            for _ in range(1200):
                if mirror.exists() and "the last line" in mirror.read_text(errors="replace"):
                    break
                await asyncio.sleep(0.05)
            await host.stop_stream(proc)
        finally:
            await host.close()

    asyncio.run(run())
    parts = sorted(mirror.parent.iterdir())
    sizes = {p.name: (p.stat().st_size, oct(p.stat().st_mode & 0o777)) for p in parts}
    total = sum(s for s, _ in sizes.values())
    ok = (
        len(parts) == 2
        and total <= 4 * part
        and all(m == "0o600" for _, m in sizes.values())
        and "the last line" in mirror.read_text()
    )
    return ok, f"6 MB flood -> {total} bytes in {len(parts)} parts {sizes}"


def advise_trickle(audit: Audit) -> tuple[bool, str]:
    """Item 8: ``advise --url`` against a server sending its headers a byte at a time."""
    port = free_port()
    srv = subprocess.Popen(
        [sys.executable, str(HOSTILE), "--port", str(port), "--mode", "trickle", "--lifetime", "150"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    audit.pids.note(srv.pid, "hostile trickle server")
    try:
        time.sleep(0.8)
        rc, out, took = _watched(
            audit, [sys.executable, "-m", "console", "advise", "--url", f"http://127.0.0.1:{port}", "--no-save"], 130
        )
        return took < 40 and rc == 1 and "Traceback" not in out, f"advise exit {rc} after {took:.1f} s: {out.strip()[-120:]!r}"
    finally:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()


def _serve(body: str) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, text: str) -> None:
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._send(body if self.path.startswith("/server_info") else "{}")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send('{"success": true, "message": ""}')

        def log_message(self, *_a: Any) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


def malformed_server_info(audit: Audit, how: str) -> tuple[bool, str]:
    """Item 10: a rank whose ``dynamic_speculation`` is a string, or whose threshold reads
    JSON ``Infinity``: ``threshold 7 --url`` says one line naming it, never a traceback nor
    'overridden by another client'."""
    key = "speculative_disable_batch_threshold"
    if how == "string":
        entry, words = f'{{"{key}": 5, "dynamic_speculation": "oops"}}', "dynamic_speculation is a str"
    else:
        ranks = '[{"rank": 0, "active": true, "threshold": 7}, {"rank": 1, "active": true, "threshold": Infinity}]'
        entry = f'{{"{key}": 7, "dynamic_speculation": {{"mode": "speculative", "active": true, "ranks": {ranks}}}}}'
        words = "TP1 threshold is Infinity"
    server, port = _serve(f'{{"model_path": "m", "tp_size": 2, "internal_states": [{entry}]}}')
    try:
        res = audit.cli("threshold", "7", "--url", f"http://127.0.0.1:{port}", timeout_s=60)
    finally:
        server.shutdown()
        server.server_close()
    said = res.stdout + res.stderr
    ok = "Traceback" not in said and words in said and "overridden" not in said and "N=inf" not in said
    return ok, f"exit {res.returncode}: {said.strip()[-160:]!r}"


def fleet_1000(audit: Audit) -> tuple[bool, str]:
    """Item 14: one ``fleet status --json`` of 1000 members (benchmarks/fleet_status_scale.py)."""
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks.fleet_status_scale", "--members", "1000", "--rounds", "1", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    r = json.loads(res.stdout)["rounds"][0]
    return r["wall_s"] <= 10 and r[
        "peak_rss_mb"
    ] <= 300, f"wall {r['wall_s']} s, peak RSS {r['peak_rss_mb']} MB, exit {r['exit']}"


def _not_run(why: str) -> tuple[bool, str]:
    return False, why


def check_remote_faults(audit: Audit) -> None:
    audit.check("fault", "r4.8 advise against a trickling server", lambda: advise_trickle(audit))
    for how in ("string", "Infinity"):
        audit.check("fault", f"r4.10 /server_info rank {how}", partial(malformed_server_info, audit, how))
    audit.check("fault", "r4.14 fleet status of 1000 members", lambda: fleet_1000(audit))
    names = ("r4.5 remote log path /tmp/..", "r4.6 tunnel owner SIGKILLed", "r4.6 endless remote", "r4.7 mirror flood")
    if audit.only and not any(audit.only in n for n in names):
        return
    why = sshd_available()
    if why:
        for name in names:
            audit.check("fault", name, partial(_not_run, f"not run here: {why}"))
        return
    with start_sshd(audit.root / "sshd") as sshd:
        audit.pids.exempt.add(sshd.proc.pid)
        for child in psutil.Process(sshd.proc.pid).children(recursive=True):
            audit.pids.exempt.add(child.pid)  # the listener itself is the audit's rig, not ours to judge
        checks = (bad_remote_log_path, tunnel_outlives_owner, endless_remote, flooding_mirror)
        for name, fn in zip(names, checks, strict=True):
            audit.check("fault", name, partial(fn, audit, sshd))
