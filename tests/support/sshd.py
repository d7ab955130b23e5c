"""A real OpenSSH server on 127.0.0.1 as the "remote host" of fleet tests.

    with start_sshd(tmp_path) as sshd:
        sshd.ssh_options     # ["-F", "/dev/null", "-p", PORT, "-i", KEY, ...] for a member
        sshd.remote_command  # this checkout's CLI: [python, "-m", "console"]

A throwaway host key and client key live in the given directory; the server accepts only
that key, for the current user, on a free loopback port, and runs under ``timeout`` so it
never outlives the test session. Needs Debian's openssh-server (scripts/test installs it).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.sim import REPO_ROOT, free_port

SSHD = "/usr/sbin/sshd"
# The test sshd is one per session (tests/fleet/conftest.py), stopped at its end; this bound
# only ends one a dead pytest left behind. It must outlive a session: at 900 s a slow CI run
# (28 min of pytest) lost it before its last fleet tests ("Connection refused").
LIFETIME_S = 3 * 3600
CI_LIMIT_S = 90 * 60  # CI's whole run


def sshd_available() -> str | None:
    """None if a test sshd can run here, else why not."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is not installed (apt-get install openssh-server; scripts/test does)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "the ssh client is not installed (openssh-client)"
    return None


@dataclass
class Sshd:
    port: int
    dir: Path
    proc: subprocess.Popen
    key: Path

    @property
    def host(self) -> str:
        return f"{getpass.getuser()}@127.0.0.1"

    @property
    def ssh_options(self) -> list[str]:
        return [
            "-F",
            "/dev/null",
            "-p",
            str(self.port),
            "-i",
            str(self.key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.dir / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
        ]

    @property
    def remote_command(self) -> list[str]:
        return [sys.executable, "-m", "console"]

    def remote_env(self, state_dir: Path) -> dict[str, str]:
        return {"PYTHONPATH": str(REPO_ROOT), "SPECCONSOLE_STATE_DIR": str(state_dir)}

    def log_text(self) -> str:
        try:
            return (self.dir / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(5)
                break
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> Sshd:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "specconsole-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


def start_sshd(directory: Path, timeout_s: float = 20.0) -> Sshd:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    for name in ("host_key", "client_key"):
        _keygen(d / name)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    (d / "known_hosts").write_text(
        f"[127.0.0.1]:{port} {(d / 'host_key.pub').read_text().split(' ', 2)[0]} "
        f"{(d / 'host_key.pub').read_text().split(' ', 2)[1]}\n"
    )
    (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d / "host_key"}
AuthorizedKeysFile {d / "authorized_keys"}
PidFile {d / "sshd.pid"}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers {getpass.getuser()}
AllowTcpForwarding local
X11Forwarding no
PrintMotd no
MaxStartups 50:30:100
MaxSessions 100
LogLevel ERROR
""")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
    log = open(d / "sshd.log", "ab")
    proc = subprocess.Popen(
        ["timeout", "-s", "TERM", str(LIFETIME_S), SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    sshd = Sshd(port=port, dir=d, proc=proc, key=d / "client_key")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}:\n{sshd.log_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return sshd
        except OSError:
            time.sleep(0.05)
    sshd.stop()
    raise TimeoutError(f"sshd did not listen on 127.0.0.1:{port} within {timeout_s} s:\n{sshd.log_text()}")
