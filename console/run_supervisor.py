"""Every run a console starts has its own supervisor, and the console is only its client.

``DetachedSupervisors`` starts `specconsole supervise` for one profile's run in its own
session (no terminal: a closed SSH link, a killed or hung console, an OOM kill of the
console end nothing but the view), its output in ``<state dir>/logs/<name>/supervise-*.log``.
``launch`` starts one that takes the run's restart lock, launches the server (the record
names it as the run's supervisor before the server starts) and supervises it; the console
waits for its first word (launched, or why not: the conflict, the bad profile, the failure).
``adopt`` starts one for a live run found without a supervisor (it never launches). The
session's ``ProfileRun`` asks through ``RunSupervisorPort`` (server_control/session/run_backends.py).

The supervisor runs the profile *file*: a profile changed in memory is carried only where
`supervise` has an option for it (``--port``: the demo's free port, a fleet member moved
off a busy one; ``--time-scale``: the simulator's). ``for_profile`` says why not otherwise,
and that console then supervises in its own process, as a library session does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from server_control.model.supervisor_start import SupervisorStart
from server_control.model.vocabulary import Outcome
from server_control.state.run_logs import open_new_log
from server_control.state.state_dir import resolve_state_dir

if TYPE_CHECKING:
    from server_control.config.profile import Profile

ANSWER_S = 120.0  # a launching supervisor must say launched (or why not) within this
LOG_CAP = 256 * 1024  # what is read of its log while waiting
EXIT_CONFLICT, EXIT_USAGE = 3, 2  # supervise's exit codes for refusals (console/cli/common.py)
STARTED = ("launched", "adopted")


class DetachedSupervisors:
    """Starts the detached supervisors of one profile's run (``RunSupervisorPort``)."""

    def __init__(self, profile_args: list[str], name: str, state_dir: Path) -> None:
        self.profile_args = profile_args  # --profile F [--time-scale X]: the run's profile as supervise loads it
        self.state_dir = state_dir
        self.log_dir = state_dir / "logs" / name

    @classmethod
    def for_profile(cls, profile: Profile, state_dir: str | Path | None) -> DetachedSupervisors | str:
        """The supervisors of ``profile``'s run, or why a detached `supervise` could not run it
        (a profile that exists only in this process)."""
        from server_control.config.profile import ProfileError, load_profile  # noqa: PLC0415

        path = profile.path
        try:
            on_disk = load_profile(path) if path else None
        except (ProfileError, OSError) as exc:
            return f"its profile file cannot be read by another process: {exc}"
        if on_disk is None or on_disk.name != profile.name:
            return "its profile exists only in this process"
        args = ["--profile", str(path)]
        scale = profile.sim.get("time_scale", 1.0)
        if scale != on_disk.sim.get("time_scale", 1.0):
            args += ["--time-scale", repr(float(scale))]
        carried = dataclasses.replace(
            on_disk, server={**on_disk.server, "port": profile.port}, sim={**on_disk.sim, "time_scale": scale}
        )
        if carried != dataclasses.replace(profile, sim={**profile.sim, "time_scale": scale}):
            return "it was changed in this process beyond its port and time scale"
        return cls(args, profile.name, resolve_state_dir(state_dir))

    def _spawn(self, port: int, extra: list[str], answer_fd: int | None = None) -> tuple[subprocess.Popen[bytes], Path]:
        log_path = self.log_dir / f"supervise-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6}.log"
        log_path, fd = open_new_log(log_path)  # every directory it makes is 0700
        answer = ["--answer-fd", str(answer_fd)] if answer_fd is not None else []
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "console",
                    "supervise",
                    *self.profile_args,
                    "--state-dir",
                    str(self.state_dir),
                    "--port",
                    str(port),
                    "--detached",
                    *extra,
                    *answer,
                ],
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=(answer_fd,) if answer_fd is not None else (),
            )
        finally:
            os.close(fd)
        # reaped when it ends (it usually outlives this process: then init reaps it)
        threading.Thread(target=proc.wait, name=f"reap-supervise-{proc.pid}", daemon=True).start()
        return proc, log_path

    async def launch(self, port: int) -> SupervisorStart:
        """Its answer comes on a pipe (``supervise --answer-fd``), read to EOF within
        ``ANSWER_S`` and ``LOG_CAP`` bytes: its first event, or what it said before it ended."""
        read_end, write_end = os.pipe()
        try:
            proc, log_path = self._spawn(port, ["--json", "--launch-only"], answer_fd=write_end)
        finally:
            os.close(write_end)
        try:
            data = await asyncio.wait_for(read_to_eof(read_end), ANSWER_S)
        except TimeoutError:
            return SupervisorStart(
                Outcome.FAILED,
                f"its supervisor (pid {proc.pid}) said nothing in {ANSWER_S:g} s; it may still launch it (log {log_path})",
                proc.pid,
                str(log_path),
            )
        finally:
            os.close(read_end)
        said = parse_answer(data)
        if said.started:  # "launched" (with --launch-only it never adopts)
            return SupervisorStart(
                Outcome.DONE,
                f"launched under its own supervisor (specconsole supervise pid {proc.pid}, log {log_path})",
                proc.pid,
                str(log_path),
            )
        try:
            code = await asyncio.wait_for(asyncio.to_thread(proc.wait), 10)
        except TimeoutError:
            code = None
        why = said.text or f"specconsole supervise exited {code} (log {log_path})"
        outcome = Outcome.REFUSED if code in (EXIT_CONFLICT, EXIT_USAGE) or said.nothing else Outcome.FAILED
        return SupervisorStart(outcome, why, proc.pid, str(log_path))

    def adopt(self, port: int) -> SupervisorStart:
        proc, log_path = self._spawn(port, ["--adopt-only"])  # answered by its own log and the record
        return SupervisorStart(
            Outcome.DONE, f"started specconsole supervise pid {proc.pid} for it (log {log_path})", proc.pid, str(log_path)
        )


def member_supervisors(profile: Profile, state_dir: str | Path | None) -> DetachedSupervisors | None:
    """A fleet member's (server_control/fleet/member.py ``SupervisorsFor``); None where a
    detached `supervise` cannot run its profile: the fleet console then supervises it."""
    got = DetachedSupervisors.for_profile(profile, state_dir)
    return None if isinstance(got, str) else got


@dataclasses.dataclass(frozen=True)
class Answer:
    started: bool = False  # it said launched or adopted
    nothing: bool = False  # it said there was nothing to supervise
    text: str = ""  # its other lines (errors), joined


async def read_to_eof(fd: int) -> bytes:
    """``fd`` (a pipe) read to EOF on the event loop, at most ``LOG_CAP`` bytes."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    chunks: list[bytes] = []
    size = 0

    def readable() -> None:
        nonlocal size
        try:
            got = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            got = b""
        chunks.append(got[: LOG_CAP - size])
        size += len(got)
        if (not got or size >= LOG_CAP) and not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
    return b"".join(chunks)


def parse_answer(data: bytes) -> Answer:
    """A supervisor's answer: its JSON events and the rest; an unreadable line is text."""
    started = nothing = False
    text: list[str] = []
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        try:
            event = json.loads(line).get("event") if line.startswith("{") else None
        except (ValueError, AttributeError):
            event = None
        if event in STARTED:
            started = True
        elif event == "nothing":
            nothing = True
        elif event is None and line:
            text.append(line)
    return Answer(started, nothing, " ".join(text)[-2000:])
