"""Start, wait for, load and stop a real SGLang server on this CPU (test rig only).

The server runs under coreutils ``timeout`` (the watchdog: when the lifetime runs out it
signals the whole process group) in a new session, so its process group id is the pid we
started; ``stop()`` signals that group and waits until no process of it remains.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import run_figures

READY_LINE = "The server is fired up and ready to roll!"
# A port the server was given was free when picked and taken when bound (another process's
# server or an outgoing connection took it in the ~35 s a start takes): uvicorn's HTTP port
# says "error while attempting to bind on address ...: address already in use", a TCPStore
# or a socket of SGLang's own EADDRINUSE's text. SGLang's HTTP server then ends but its
# process does not, so without this the wait ran to its timeout (600 s in one CI run).
PORT_TAKEN_RE = re.compile(r"address already in use", re.IGNORECASE)


class PortTaken(RuntimeError):
    """The server could not bind a port it was given: start it again on other ports."""


DECODE_RE = re.compile(r"Decode batch[,.] #running-req: (\d+).*?accept len: ([0-9.]+)")


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


def start_ticks(pid: int) -> int | None:
    """The process start time (clock ticks since boot), None when no such live process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def still_alive(identities: dict[int, int | None]) -> list[int]:
    """Which of {pid: start_ticks} still run as the same process (not a reused pid)."""
    return [pid for pid, ticks in identities.items() if ticks is not None and start_ticks(pid) == ticks]


def rss_mb(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[pid] = int(line.split()[1]) / 1024
        except OSError:
            pass
    return out


@dataclass
class RigServer:
    """A server this test started (``proc``) or one started elsewhere whose process group
    is known (``group``, e.g. launched through server_control)."""

    proc: subprocess.Popen | None
    port: int
    log_path: Path
    group: int | None = None
    started: float = field(default_factory=time.monotonic)
    ready_s: float | None = None
    label: str | None = None  # its configuration in the run's start figures (default: the log's name)
    skip_file: Path | None = None  # rig/skip_draft_extend.py's file (a patched pool server)
    # where this server's output begins in ``log_path`` (the log is appended to: an earlier
    # server's ready line there must not make this one look ready)
    log_offset: int = 0

    @contextlib.contextmanager
    def skipping_draft_extend(self) -> Iterator[None]:
        """SGLang skips draft-extend at target-only steps inside the block, as with
        ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1`` (rig/skip_draft_extend.py)."""
        assert self.skip_file is not None, "not a patched pool server: no skip file"
        self.skip_file.touch()
        try:
            yield
        finally:
            self.skip_file.unlink(missing_ok=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pgid(self) -> int:
        return self.group if self.group is not None else self.proc.pid

    @classmethod
    def start(cls, argv: list[str], env: dict, log_path: Path, port: int, lifetime_s: int = 1200) -> RigServer:
        """Run ``argv`` (a full command line) under a watchdog in a new session."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                ["timeout", "-k", "15", str(lifetime_s), *argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(proc=proc, port=port, log_path=log_path, log_offset=offset)

    def log_text(self) -> str:
        """This server's output (from ``log_offset``)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text's universal newlines

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def wait_ready(self, timeout_s: float = 400, also: tuple[RigServer, ...] = ()) -> float:
        """Seconds from start to the ready line; raises with the log tail on failure,
        ``PortTaken`` as soon as this server's log (or the log of a server in ``also``: the
        other nodes of one server) says a port was taken."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log_text()
            if READY_LINE in text:
                self.ready_s = time.monotonic() - self.started
                self.count_start("ready")
                return self.ready_s
            logs = [(self, text), *((other, other.log_text()) for other in also)]  # each log read once a turn
            taken = next((server for server, log in logs if PORT_TAKEN_RE.search(log)), None)
            if taken is not None:
                self.count_start("port taken")
                raise PortTaken(f"a port was taken before the server bound it; log {taken.log_path}:\n{taken.log_tail()}")
            if (self.proc is not None and self.proc.poll() is not None) or not self.processes():
                code = None if self.proc is None else self.proc.returncode
                self.count_start("exited")
                raise RuntimeError(f"server exited ({code}) before ready; log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.5)
        self.count_start("not ready")
        raise TimeoutError(f"server not ready after {timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")

    def count_start(self, outcome: str) -> None:
        """One start in the run's figures (its count and start-up time end the summary)."""
        start_s = time.monotonic() - self.started
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0].rpartition("/")[2] or "-"
        name = self.label or self.log_path.name
        run_figures.record(f"{run_figures.STARTS}: {name}, {outcome}, by={test}, start_s={start_s:.1f}")

    def request(self, path: str, body: dict | None = None, timeout: float = 120):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def generate(self, prompt: str, max_new_tokens: int, timeout: float = 300) -> dict:
        return self.request(
            "/generate",
            {"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": True}},
            timeout=timeout,
        )

    def generate_batch(self, n: int, max_new_tokens: int, timeout: float = 600) -> list[dict]:
        """``n`` prompts in ONE /generate request: SGLang admits them together, so the
        decode batch is ``n`` from its first step (threads would trickle in)."""
        return self.request(
            "/generate",
            {
                "text": [f"request {i} the quick brown fox" for i in range(n)],
                "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": True},
            },
            timeout=timeout,
        )

    def generate_concurrently(self, n: int, max_new_tokens: int) -> list[dict]:
        """``n`` requests at once (threads); returns their responses in order."""
        results: list = [None] * n

        def one(i: int) -> None:
            try:
                results[i] = self.generate(f"request {i} the quick brown fox", max_new_tokens)
            except Exception as exc:  # noqa: BLE001 - reported below, with the request index
                results[i] = exc

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        if errors:
            raise RuntimeError(f"{len(errors)} of {n} requests failed: {errors[:3]}")
        return results

    def decode_lines(self, since: int = 0) -> list[tuple[int, float]]:
        """(running requests, accept len) of every ``Decode batch`` line after offset."""
        return [(int(m.group(1)), float(m.group(2))) for m in DECODE_RE.finditer(self.log_text()[since:])]

    def processes(self) -> list[int]:
        return group_pids(self.pgid)

    def stop(self, grace_s: float = 30) -> list[int]:
        """SIGTERM the group, SIGKILL after ``grace_s``; returns pids still alive (none)."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self._reap(0.2)
                if not group_pids(self.pgid):
                    return []
        self._reap(5)
        return group_pids(self.pgid)

    def _reap(self, timeout: float) -> None:
        if self.proc is None:
            time.sleep(timeout)
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass


def plain_launch_argv(args: list[str], python: str | None = None) -> list[str]:
    """Unpatched SGLang with the rig preloaded (Phase 1 launcher)."""
    return [python or sys.executable, "-m", "tests.real_sglang.rig.launch", *args]
