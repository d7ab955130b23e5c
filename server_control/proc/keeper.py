"""``python -m server_control.keeper``: the small process that starts a server and keeps
its log and its exit status, so that whoever adopts the run later learns how it ended.

The launcher writes one JSON object on the keeper's stdin::

    {"argv": [...], "env": {...}, "cwd": "...", "log_fd": N, "log_path": "...",
     "log_mode": 384, "max_bytes": 0, "keep_rotated": 3, "exit_file": "..."}

The keeper forks once (so the launcher never has a child to reap), starts the server in
a new session (its own process group: the run's leader) with stdout+stderr into a pipe,
answers ``{"pid": N, "create_time": T, "boot_id": B, "start_ticks": K}`` (the epoch start
time, and the clock-independent one of server_control/host/start_ticks.py) or ``{"error":
"..."}`` on stdout and closes it. Then it copies the pipe into the log file, rotating it by size at a line boundary
(``<log>`` -> ``<log>.1`` -> ... ``<log>.<keep_rotated>``, the oldest deleted; a follower
of ``<log>`` sees a rename and reads on), and writes ``{"pid", "create_time",
"returncode", "ended_at"}`` to ``exit_file`` the moment the server's process exits
(returncode as ``subprocess`` gives it: -N for signal N). A full disk drops log bytes
(counted in the exit file), never blocks or breaks the server. The keeper ignores
SIGINT, SIGTERM and SIGHUP: it ends when the server has exited and its output is drained.
Its own environment carries no key: the server's environment arrives through the pipe.

With ``"record": {...}, "record_path": "..."`` in the request (a launch of a profile), the
keeper itself writes the run record (the template with the server's pid, start time,
group and session filled in) and a start note in ``exit_file`` (``returncode`` null, its
own pid, the record) the moment the server exists and before it answers: a launcher
killed at any point after that leaves a run that the next command finds. A record that
cannot be written (a full disk) ends the server at once and answers the error: no server
runs without a record.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

from server_control.host.start_ticks import proc_start
from server_control.state.private_files import atomic_write, open_private

READ_CHUNK = 1 << 16


class LogWriter:
    """Append to the run's log file; rotate by size at a line boundary (a part exceeds
    ``max_bytes`` only by the line that did not fit). A line longer than a whole part (a
    server writing without end) is cut at the limit, so the disk a run takes stays bounded
    by about ``(keep + 1) * 2 * max_bytes`` whatever it writes."""

    def __init__(self, fd: int, path: str, mode: int, max_bytes: int, keep: int) -> None:
        self.fd, self.path, self.mode = fd, path, mode
        self.max_bytes, self.keep = max_bytes, keep
        self.size = os.fstat(fd).st_size
        self.at_line_start = True
        self.line_len = 0  # bytes of the line in progress written so far
        self.dropped = 0
        self.rotations = 0

    def _raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError:
                self.dropped += len(view)
                return
            view = view[n:]
            self.size += n
        self.at_line_start = data.endswith(b"\n")
        nl = data.rfind(b"\n")
        self.line_len = len(data) - nl - 1 if nl >= 0 else self.line_len + len(data)

    def _rotate(self) -> None:
        try:
            for k in range(self.keep, 0, -1):
                src = self.path if k == 1 else f"{self.path}.{k - 1}"
                if k == self.keep and os.path.lexists(f"{self.path}.{k}"):
                    os.unlink(f"{self.path}.{k}")
                if os.path.lexists(src):
                    os.rename(src, f"{self.path}.{k}")
            if self.keep == 0:
                os.unlink(self.path)
            fd = open_private(self.path, self.mode)
        except OSError:
            self.max_bytes = 0  # keep writing where we are: losing rotation beats losing lines
            return
        os.close(self.fd)
        self.fd, self.size = fd, 0
        self.rotations += 1

    def write(self, data: bytes) -> None:
        while data:
            room = self.max_bytes - self.size
            if not self.max_bytes or len(data) <= room:
                self._raw(data)
                return
            cut = data.rfind(b"\n", 0, max(room, 0))
            if cut >= 0:  # whole lines up to the limit, then a new part
                self._raw(data[: cut + 1])
                data = data[cut + 1 :]
            elif self.size and self.at_line_start:
                pass  # the next line would not fit: new part first
            else:
                nl = data.find(b"\n")
                end = nl + 1 if nl >= 0 else len(data)
                if self.line_len + end <= self.max_bytes:  # the line in progress fits a part: finish it here
                    self._raw(data[:end])
                    data = data[end:]
                    if nl < 0:
                        return
                elif room > 0:  # a line longer than a whole part: cut it at the limit
                    self._raw(data[:room])
                    data = data[room:]
            self._rotate()


def _pump(rfd: int, writer: LogWriter) -> None:
    while True:
        try:
            data = os.read(rfd, READ_CHUNK)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        writer.write(data)
    os.close(rfd)


def _say(log_fd: int, msg: str) -> None:
    """A line of the keeper's own in the run's log (best effort: the disk may be full)."""
    try:
        os.write(log_fd, f"specconsole: {msg}\n".encode())
    except OSError:
        pass


def _reply(obj: dict[str, Any]) -> None:
    """Answer the launcher and let go of its pipes. A launcher killed before it read the
    answer (EPIPE) changes nothing here: the record is written, the server runs, and the
    keeper goes on keeping its log and its exit status."""
    try:
        os.write(1, (json.dumps(obj) + "\n").encode())
    except OSError:
        pass  # nobody reads the answer any more; the run is found through its record
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _started_record(spec: dict[str, Any], pid: int, ct: float, start: Any) -> dict[str, Any] | None:
    """The launcher's record template with this server's identity filled in."""
    rec = spec.get("record")
    if not isinstance(rec, dict):
        return None
    rec = dict(rec)
    me = proc_start(os.getpid())
    rec.update(
        keeper_pid=os.getpid(),
        keeper_ticks=me.ticks if me else None,
        pid=pid,
        create_time=ct,
        pgid=pid,
        sid=pid,
        boot_id=start.boot_id if start else None,
        start_ticks=start.ticks if start else None,
        started_at=_dt.datetime.fromtimestamp(ct).astimezone().isoformat(timespec="seconds"),
    )
    return rec


def _write_record(spec: dict[str, Any], proc: subprocess.Popen[bytes], ct: float, start: Any) -> dict[str, Any] | str | None:
    """Write the start note and the run record; the record (None: none asked) or the error."""
    rec = _started_record(spec, proc.pid, ct, start)
    if rec is None:
        return None
    note = {
        "pid": proc.pid,
        "create_time": ct,
        "boot_id": start.boot_id if start else None,
        "start_ticks": start.ticks if start else None,
        "returncode": None,
        "keeper_pid": os.getpid(),
        "record": rec,
    }
    try:
        atomic_write(spec["exit_file"], json.dumps(note))
    except OSError:
        pass  # the record below is what counts; the note only helps to recover a lost record
    try:
        atomic_write(spec["record_path"], json.dumps(rec, indent=1))
    except OSError as exc:
        for sig in (signal.SIGKILL,):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        proc.wait()
        return f"cannot write the run record {spec['record_path']}: {exc.strerror or exc}; the server was ended"
    return rec


def serve(spec: dict[str, Any]) -> int:
    log_fd = spec["log_fd"]
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            spec["argv"],
            stdin=subprocess.DEVNULL,
            stdout=wfd,
            stderr=subprocess.STDOUT,
            env=spec["env"],
            cwd=spec["cwd"],
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        msg = f"cannot start {spec['argv'][0]}: {exc.strerror or exc}"
        _say(log_fd, msg)
        _reply({"error": msg})
        return 1
    finally:
        os.close(wfd)
    try:
        ct = psutil.Process(proc.pid).create_time()
    except psutil.Error:
        ct = time.time()
    start = proc_start(proc.pid)  # the clock-independent identity (server_control/host/start_ticks.py)
    spec.pop("env", None)  # the keys in it are not needed any more
    rec = _write_record(spec, proc, ct, start)
    if isinstance(rec, str):
        _say(log_fd, rec)
        _reply({"error": rec})
        return 1
    _reply(
        {
            "pid": proc.pid,
            "create_time": ct,
            "boot_id": start.boot_id if start else None,
            "start_ticks": start.ticks if start else None,
            "record": rec,
            "keeper_pid": os.getpid(),
        }
    )
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    writer = LogWriter(
        log_fd, spec["log_path"], spec.get("log_mode", 0o600), spec.get("max_bytes", 0), spec.get("keep_rotated", 3)
    )
    pump = threading.Thread(target=_pump, args=(rfd, writer), daemon=True)
    pump.start()
    rc = proc.wait()
    status = {"pid": proc.pid, "create_time": ct, "returncode": rc, "ended_at": time.time(), "keeper_pid": os.getpid()}
    try:
        atomic_write(spec["exit_file"], json.dumps(status))
    except OSError:
        pass
    pump.join()
    if writer.dropped:
        status["dropped_log_bytes"] = writer.dropped
        try:
            atomic_write(spec["exit_file"], json.dumps(status))
        except OSError:
            pass
    return 0


def main() -> int:
    spec = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if os.fork():
        os._exit(0)  # the launcher reaps this one at once; the child below lives on
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main())
