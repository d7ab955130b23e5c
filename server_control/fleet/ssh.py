"""Reach a remote member with the system ``ssh`` client, running the headless CLI there.

    host = SshHost(member_spec)
    res = await host.run("status", "--profile", "eagle3-tp8", "--json", timeout_s=30)
    res.rc, res.json(), res.no_answer
    stream = host.stream(["logs", "--follow", path], out_file)     # a long-lived remote command
    tunnel = host.tunnel(local_port, "127.0.0.1", 30000)     # ssh -N -L: HTTP to the server
    await host.close()                                       # ends the shared connection

Why the system client (not asyncssh): it is the one the operator already uses and has
configured: ~/.ssh/config host aliases, ProxyJump bastions, agents and hardware keys,
certificates, known_hosts policy, Kerberos. Every command here is one an operator can
copy and run by hand (``SshHost.argv``). Connections are shared (ControlMaster): one TCP
connection and one authentication per host, later commands start in milliseconds. The
crypto runs in ssh's process, not in the console's.

Nothing runs on the remote host but the existing ``specconsole`` CLI (no agent, no port
beyond sshd). A long-lived remote command (``logs --follow``) is wrapped so it ends when the ssh
connection does: it runs in the background of a remote ``sh`` that waits for EOF on its
stdin, which sshd closes when the connection goes.

Exit code 255 is ssh's own failure (host unreachable, authentication refused): such a
call is "no answer", never a result of the remote command.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from server_control.fleet.spec import MemberSpec
from server_control.proc.keeper import READ_CHUNK, LogWriter
from server_control.sanitize import clean_json

SSH = "ssh"
SSH_FAILED = 255
TIMED_OUT = -1
TOO_LARGE = -2
MAX_OUTPUT_BYTES = 4 << 20  # a remote command's stdout (and stderr) is read up to this
BASE_OPTIONS = (
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "LogLevel=ERROR",
)
CONTROL_PERSIST_S = 30


def control_dir() -> Path:
    """A short private directory for ControlMaster sockets (a socket path must stay under
    ~100 bytes, so not inside a deep state dir)."""
    d = Path(tempfile.gettempdir()) / f"specconsole-ssh-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    if d.stat().st_uid != os.getuid() or d.stat().st_mode & 0o077:
        raise PermissionError(f"{d} must be a directory of uid {os.getuid()} with mode 0700")
    return d


def _die_with_owner() -> None:
    """In the forked ssh, before exec: SIGTERM when the process that started it dies, even
    by SIGKILL (Linux ``PR_SET_PDEATHSIG``): a tunnel left with ppid 1 let any local user
    reach the remote server's control API through the operator's login."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the owner's own cleanup (close, stop_stream) still ends it


@dataclass(frozen=True)
class SshResult:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def no_answer(self) -> bool:
        """ssh itself failed or the call timed out: the remote command gave no answer."""
        return self.rc in (SSH_FAILED, TIMED_OUT, TOO_LARGE)

    def json(self) -> dict[str, Any] | None:
        """The remote command's --json answer: the whole stdout (``status`` prints indented
        JSON), else its last line that is a JSON object; None if neither."""
        for text in (self.stdout, *reversed(self.stdout.strip().splitlines())):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return cast("dict[str, Any]", clean_json(value))  # a remote server's words: terminal-safe from here on
        return None

    def why(self) -> str:
        """One line for the operator: what failed."""
        if self.rc == TIMED_OUT:
            return f"no answer within {self.elapsed_s:.0f} s"
        if self.rc == TOO_LARGE:
            return f"answer too large (over {MAX_OUTPUT_BYTES} bytes): the remote command was ended"
        err = (self.stderr.strip().splitlines() or [""])[-1]
        if self.rc == SSH_FAILED:
            return f"ssh failed: {err or 'exit 255'}"
        return err or f"exit {self.rc}"


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, bool]:
    """Everything up to EOF, or (the first ``cap`` bytes, True) once more than ``cap`` came."""
    if stream is None:
        return b"", False
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > cap:
            return b"".join(chunks), True
        chunks.append(chunk)


async def _end(proc: asyncio.subprocess.Process, grace_s: float = 2.0) -> None:
    """SIGTERM the process group we started, SIGKILL it after ``grace_s``."""
    if proc.returncode is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            await asyncio.wait_for(proc.wait(), grace_s)
            return
        except TimeoutError:
            continue


MIRROR_PART_BYTES = 64 << 20  # a streamed log mirror's part; with MIRROR_KEEP old ones, ~3 x 2 x 64 MiB at most
MIRROR_KEEP = 2


async def _pump_into(reader: asyncio.StreamReader | None, writer: LogWriter) -> None:
    """The stream's stdout into its mirror until EOF; the mirror's file closed after."""
    try:
        while reader is not None:
            data = await reader.read(READ_CHUNK)
            if not data:
                return
            writer.write(data)
    finally:
        os.close(writer.fd)


class SshHost:
    def __init__(self, member: MemberSpec, *, multiplex: bool = True) -> None:
        self.member = member
        self.multiplex = multiplex
        self._streams: list[asyncio.subprocess.Process] = []
        self._pumps: dict[asyncio.subprocess.Process, asyncio.Task[None]] = {}

    def _options(self, mux: bool) -> list[str]:
        if mux and self.multiplex:
            mux_opts = [
                "-o",
                "ControlMaster=auto",
                "-o",
                f"ControlPath={control_dir()}/%C",
                "-o",
                f"ControlPersist={CONTROL_PERSIST_S}",
            ]
        else:
            mux_opts = ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        return [*BASE_OPTIONS, *mux_opts, *self.member.ssh_options]

    def argv(self, *cli_args: str, mux: bool = True) -> list[str]:
        """``ssh [options] HOST -- 'env K=V specconsole ARGS'``."""
        return [SSH, *self._options(mux), self.member.host, "--", self.member.remote_command(*cli_args)]

    async def run(self, *cli_args: str, timeout_s: float = 60.0) -> SshResult:
        """Run ``specconsole ARGS`` on the host; never raises for what the remote side did."""
        argv = self.argv(*cli_args)
        t0 = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_owner,
            )
        except OSError as exc:
            return SshResult(tuple(argv), SSH_FAILED, "", f"cannot run {SSH}: {exc}", 0.0)

        async def collect() -> tuple[bytes, bytes, bool]:
            reads = [asyncio.ensure_future(_read_capped(s, MAX_OUTPUT_BYTES)) for s in (proc.stdout, proc.stderr)]
            try:
                pending = set(reads)
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    if any(t.result()[1] for t in done):
                        return b"", b"", True  # one stream said too much: stop reading both
            finally:
                for t in reads:
                    t.cancel()
            await proc.wait()
            return reads[0].result()[0], reads[1].result()[0], False

        try:
            out, err, too_large = await asyncio.wait_for(collect(), timeout_s)
        except TimeoutError:
            await _end(proc)
            return SshResult(tuple(argv), TIMED_OUT, "", "", time.monotonic() - t0)
        except asyncio.CancelledError:
            await _end(proc)
            raise
        if too_large:
            await _end(proc)
            return SshResult(tuple(argv), TOO_LARGE, "", "", time.monotonic() - t0)
        return SshResult(
            tuple(argv),
            proc.returncode if proc.returncode is not None else SSH_FAILED,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - t0,
        )

    async def stream(
        self, cli_args: list[str], out_path: Path, *, part_bytes: int = MIRROR_PART_BYTES, keep: int = MIRROR_KEEP
    ) -> asyncio.subprocess.Process:
        """Start ``specconsole ARGS`` on the host with its stdout appended to ``out_path``
        (mode 0600), through the run logs' writer: rotated at ``part_bytes``, ``keep`` old
        parts (``out_path.1`` ...), a line without end cut at a part, so a mirror's disk is
        bounded whatever the host sends; it ends when ``stop_stream`` (or ``close``) ends
        the ssh process."""
        inner = self.member.remote_command(*cli_args)
        # the remote CLI in the background; the shell waits for EOF on stdin (the connection
        # went), then ends it
        wrapped = f"{inner} </dev/null & p=$!; cat >/dev/null; kill $p 2>/dev/null"
        argv = [SSH, *self._options(True), self.member.host, "--", f"sh -c {shlex.quote(wrapped)}"]
        out_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)  # a run's log: private
        writer = LogWriter(fd, str(out_path), 0o600, part_bytes, keep)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_owner,
            )
        except BaseException:
            os.close(writer.fd)
            raise
        self._streams.append(proc)
        self._pumps[proc] = asyncio.create_task(_pump_into(proc.stdout, writer))
        return proc

    async def tunnel(self, local_port: int, remote_host: str, remote_port: int) -> asyncio.subprocess.Process:
        """``ssh -N -L 127.0.0.1:LOCAL:REMOTE_HOST:REMOTE_PORT`` on a connection of its own
        (a forward made through a shared master would outlive this process)."""
        argv = [
            SSH,
            *self._options(False),
            "-N",
            "-o",
            "ExitOnForwardFailure=yes",
            "-L",
            f"127.0.0.1:{local_port}:{remote_host}:{remote_port}",
            self.member.host,
        ]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_owner,
        )
        self._streams.append(proc)
        return proc

    async def stop_stream(self, proc: asyncio.subprocess.Process) -> None:
        if proc.stdin is None:  # a tunnel: nothing remote to end first
            await _end(proc)
        else:
            proc.stdin.close()  # the remote side sees EOF and ends its command
            try:
                await asyncio.wait_for(proc.wait(), 2.0)
            except TimeoutError:
                await _end(proc)
        if proc in self._streams:
            self._streams.remove(proc)
        pump = self._pumps.pop(proc, None)
        if pump is not None:
            try:
                await asyncio.wait_for(pump, 5.0)
            except (TimeoutError, asyncio.CancelledError):
                pass

    async def close(self) -> None:
        for proc in list(self._streams):
            await self.stop_stream(proc)
        if self.multiplex:  # end the shared master connection now, not after ControlPersist
            argv = [SSH, *self._options(True), "-O", "exit", self.member.host]
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=_die_with_owner,
                )
                await asyncio.wait_for(proc.wait(), 5.0)
            except (TimeoutError, OSError):
                pass
