"""The `specconsole` command as a real process, forked from an interpreter that has already
imported it (a fork server, one per test process).

A command run by a test is a real process either way: its own pid, its own stdin, stdout
and stderr, its environment, working directory, exit code and signals. Started as
``python -m console`` it first pays the interpreter's start and the imports of asyncio,
httpx, psutil and the session layer, ~0.14 of its 0.09-0.27 CPU-s; the fast loop runs
~400 of them through the tests' helpers (docs/cpu-rig.md, "Commands forked from a fork server"). Here a server process imports those once,
and each command is a fork of it that sets the request's argv, environment and directory,
takes the caller's files as its stdin, stdout and stderr, and runs ``console/__main__.py``
as ``python -m console`` does; it ends through the interpreter's own exit (``SystemExit``,
threads joined, atexit, buffers flushed), and its exit status comes back as
``subprocess`` gives it (``-N`` for a signal).

What a forked command cannot match, it does not try: a request whose environment differs
from the server's in what is read once at a process's start (``PYTHON*``, the locale, ``TZ``,
the loader's ``LD_*``) runs as ``python -m console`` instead (``run``), and so does everything when
``SPECCONSOLE_TEST_CLI=exec``. What a fresh interpreter proves that a fork cannot (each
command's imports in a clean process, the entry point) stays proven by the tests that run
commands exec'd: the documented commands with nothing running
(``tests/cli/test_documented_commands.py``) and the import rules (``tests/test_import_rules.py``).
``tests/test_command_forkserver.py`` compares the two ways command by command.

The server never outlives its caller: it ends when the caller's end of its control socket
closes (the caller exited or was killed), and after ``MAX_LIFETIME_S`` at the latest.

    python -m tests.support.command_forkserver FD    (started by ``run``; FD: the control socket)
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support import run_figures

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_LIFETIME_S = 6 * 3600.0
START_TIMEOUT_S = 60.0
KILLED_EXIT_S = 10.0
MAX_REQUEST_BYTES = 1 << 20
# Read once, when a process starts, by Python (flags, the stdio encoding, the time zone) or by
# the C library (the loader's LD_* search path and preloads, malloc's tunables): a request that
# sets any of them differently runs exec'd. PYTHONPATH is the exception (``_path_forkable``):
# the child's sys.path is rebuilt from it.
_AT_START = ("LANG", "LANGUAGE", "TZ", "GLIBC_TUNABLES")
_AT_START_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_")
_STARTUP_HOOKS = {"sitecustomize", "usercustomize"}
# Imported once by the server: what every headless command imports (not Textual: the
# commands that open a screen import it themselves, as they do when exec'd).
PRELOAD = (
    "console.cli",
    "console.cli.main",
    "console.cli.common",
    "console.cli.control",
    "console.cli.runs",
    "console.cli.status",
    "console.cli.setting",
    "console.cli.logs",
    "console.cli.journal",
    "console.cli.fleet",
    "console.cli.supervise",
    "console.cli.advise",
    "server_control.session.session",
    "server_control.net.lean_httpx",
    "psutil",
    "asyncio",
)


def command_line(args: list[str]) -> list[str]:
    """What the command is, run either way: ``python -m console ARGS``."""
    return [sys.executable, "-m", "console", *args]


def _at_start(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if (k in _AT_START or k.startswith(_AT_START_PREFIXES)) and k != "PYTHONPATH"}


def _entries(env: dict[str, str]) -> list[str]:
    return [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]


def _top_level_origins() -> dict[str, str]:
    """Every imported top-level module -> the directory it was found in ('' for built-ins)."""
    out = {}
    for name, mod in list(sys.modules.items()):
        if "." in name:
            continue
        f = getattr(mod, "__file__", None)
        if not f:
            out[name] = ""
            continue
        path = Path(f).resolve()
        out[name] = str(path.parent.parent if path.name == "__init__.py" else path.parent)
    return out


def _path_forkable(env: dict[str, str], origins: dict[str, str]) -> bool:
    """A PYTHONPATH can be honoured by a fork unless one of its directories holds a startup
    hook or shadows a module the server already imported from elsewhere."""
    for entry in _entries(env):
        d = Path(entry)
        if not d.is_dir():
            continue
        for child in d.iterdir():
            name = child.name.removesuffix(".py")
            if not (child.suffix == ".py" or (child / "__init__.py").exists()):
                continue
            if name in _STARTUP_HOOKS or (name in origins and origins[name] != str(d.resolve())):
                return False
    return True


# ---------------------------------------------------------------------------------------
# the server (its own process)


_retitle: Callable[[str], None] | None
try:  # installed with sglang and smg (the test extras bring both)
    from setproctitle import getproctitle
    from setproctitle import setproctitle as _retitle
except ImportError:  # pragma: no cover
    _retitle = None


def serve(ctl_fd: int) -> None:
    """Answer requests on the control socket until it closes; each request is forked.
    No try/finally or ``with`` here: a forked child leaves through this frame by
    ``SystemExit`` and must run nothing of the server's on its way out."""
    ctl = socket.socket(fileno=ctl_fd)
    for name in PRELOAD:
        __import__(name)
    if _retitle is not None:  # takes the argv and environment area now, while the environment is whole
        _retitle(getproctitle())
    if "textual" in sys.modules or threading.active_count() != 1:
        ctl.send(b"refused: the preload imported textual or started a thread")
        return
    ctl.send(b"ready " + json.dumps(_top_level_origins()).encode())
    own = set(_entries(dict(os.environ)))
    base_path = [p for p in sys.path[1:] if p not in own]  # the interpreter's own, after any PYTHONPATH
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, reply socket)
    deadline = time.monotonic() + MAX_LIFETIME_S
    while (left := deadline - time.monotonic()) > 0:
        for key, _ in sel.select(left):
            if key.fileobj is ctl:
                msg, fds, _flags, _addr = socket.recv_fds(ctl, MAX_REQUEST_BYTES, 4)
                if not msg:  # the caller is gone
                    return
                reply = socket.socket(fileno=fds[0])
                stdio = fds[1:4]
                pid = os.fork()
                if pid == 0:
                    _become_command(json.loads(msg), stdio, base_path, sel, ctl, children, reply)
                for fd in stdio:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                socket.send_fds(reply, [f"pid {pid}".encode()], [pidfd])
                sel.register(pidfd, selectors.EVENT_READ)
                children[pidfd] = (pid, reply)
            else:
                pid, reply = children.pop(key.fd)
                sel.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    reply.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
                except OSError:
                    pass  # the caller stopped waiting
                reply.close()


def _become_command(req: dict, stdio: list[int], base_path: list[str], sel, ctl, children, reply) -> None:
    """In the forked child: drop the server's sockets, take the request's files, directory,
    environment and argv, and run ``console/__main__.py`` as ``python -m console`` would.
    Leaves by ``SystemExit`` (``sys.exit(main())``), so the interpreter ends as it ends a
    command: threads joined, atexit run, buffers flushed."""
    sel.close()
    ctl.close()
    reply.close()
    for pidfd, (_pid, other) in children.items():
        os.close(pidfd)
        other.close()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for fd in set(stdio):
        if fd > 2:
            os.close(fd)
    cwd = req["cwd"]
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(req["env"])
    tempfile.tempdir = None  # TMPDIR read again
    sys.path[:] = [cwd, *_entries(req["env"]), *base_path]  # as `python -m` builds it
    import runpy

    main_file = str(REPO_ROOT / "console" / "__main__.py")
    sys.argv = [main_file, *req["args"]]
    if _retitle is not None:  # what ps and /proc/PID/cmdline show: the command, not the server
        _retitle(" ".join(command_line(req["args"])))
    runpy.run_module("console", run_name="__main__", alter_sys=True)
    sys.exit(0)  # console/__main__.py always exits itself; this only makes sure


# ---------------------------------------------------------------------------------------
# the caller's side


class ServerGone(RuntimeError):
    """The fork server is gone before the command was started."""


class _Server:
    """One fork server for this process, started on first use."""

    def __init__(self) -> None:
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ)
        self.at_start = _at_start(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.command_forkserver", str(theirs.fileno())],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            pass_fds=[theirs.fileno()],
            start_new_session=True,
        )
        theirs.close()
        self.ctl.settimeout(START_TIMEOUT_S)
        try:
            said = self.ctl.recv(MAX_REQUEST_BYTES)
        except OSError:
            said = b""
        self.ctl.settimeout(None)
        self.ready = said.startswith(b"ready ")
        self.origins: dict[str, str] = json.loads(said[6:]) if self.ready else {}
        self.lock = threading.Lock()
        self.forked = 0  # commands the server forked and reported the exit of
        if not self.ready:
            self.stop()

    def why_not(self) -> str:
        self.log.seek(0)
        return self.log.read()[-2000:].decode(errors="replace")

    def stop(self) -> None:
        self.ctl.close()  # the server reads EOF and returns
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own group: the session it was started in
            self.proc.wait()

    def run(self, args: list[str], cwd: str, env: dict[str, str], timeout: float | None) -> subprocess.CompletedProcess:
        cmd = command_line(args)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        inp = open(os.devnull, "rb")  # noqa: SIM115
        try:
            msg = json.dumps({"args": args, "cwd": cwd, "env": env}).encode()
            try:
                with self.lock:
                    socket.send_fds(self.ctl, [msg], [theirs.fileno(), inp.fileno(), out.fileno(), err.fileno()])
            except OSError as exc:  # nothing was started: the caller may run it exec'd
                self.ready = False
                raise ServerGone(f"{exc}; {self.why_not()}") from exc
            theirs.close()
            said, fds, _f, _a = socket.recv_fds(mine, 256, 1)
            if not said.startswith(b"pid ") or not fds:
                raise RuntimeError(f"the command fork server did not start {cmd}: {said!r}; {self.why_not()}")
            pidfd = fds[0]
            try:
                code = self._wait(mine, pidfd, timeout, cmd, out, err)
            finally:
                os.close(pidfd)
            self.forked += 1
            return subprocess.CompletedProcess(cmd, code, _text(out), _text(err))
        finally:
            for f in (mine, theirs, out, err, inp):
                f.close()

    @staticmethod
    def _wait(mine: socket.socket, pidfd: int, timeout: float | None, cmd, out, err) -> int:
        mine.settimeout(timeout)
        try:
            said = mine.recv(64)
        except TimeoutError:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # the child itself, as subprocess.run kills it
            mine.settimeout(KILLED_EXIT_S)
            try:
                mine.recv(64)  # its exit, reaped by the server
            except TimeoutError:
                raise RuntimeError(f"{cmd} did not end {KILLED_EXIT_S:.0f} s after SIGKILL") from None
            raise subprocess.TimeoutExpired(cmd, timeout, output=_raw(out), stderr=_raw(err)) from None
        if not said.startswith(b"exit "):
            raise RuntimeError(f"the command fork server went away while {cmd} ran")
        return int(said[5:])


def _raw(f) -> bytes:
    f.seek(0)
    return f.read()


def _text(f) -> str:
    """As ``subprocess.run(text=True)`` decodes: the locale's encoding, universal newlines."""
    data = _raw(f).decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")


_server: _Server | None = None
_server_pid = 0
_server_lock = threading.Lock()


def _get_server() -> _Server | None:
    global _server, _server_pid
    with _server_lock:
        if _server is None or _server_pid != os.getpid():
            _server, _server_pid = _Server(), os.getpid()
            if _server.ready:
                atexit.register(_server.stop)
            else:
                print(f"command fork server did not start, running commands exec'd: {_server.why_not()}", file=sys.stderr)
        return _server if _server.ready else None


def exec_run(args, *, cwd=None, env=None, timeout=None, why: str = "asked") -> subprocess.CompletedProcess:
    """``python -m console ARGS`` in a fresh interpreter, stdin /dev/null."""
    run_figures.record(f"{run_figures.COMMANDS}: exec'd, {why}")
    return subprocess.run(
        command_line([str(a) for a in args]),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=dict(os.environ) if env is None else env,
        stdin=subprocess.DEVNULL,
    )


def why_execd(env: dict[str, str]) -> str | None:
    """Why a command with this environment runs exec'd, or None: it is forked."""
    if os.environ.get("SPECCONSOLE_TEST_CLI") == "exec":
        return "SPECCONSOLE_TEST_CLI=exec"
    if (server := _get_server()) is None:
        return "no fork server"
    if _at_start(env) != server.at_start:
        return "PYTHON*, LD_*, locale or TZ differ"
    if not _path_forkable(env, server.origins):
        return "PYTHONPATH shadows or hooks"
    return None


def run(args, *, cwd=None, env=None, timeout=None) -> subprocess.CompletedProcess:
    """``python -m console ARGS`` as ``subprocess.run(..., capture_output=True, text=True,
    stdin=DEVNULL)`` runs it (``TimeoutExpired`` after killing it), forked from the fork
    server where the request allows it, else exec'd."""
    args = [str(a) for a in args]
    env = dict(os.environ) if env is None else dict(env)
    cwd = os.getcwd() if cwd is None else str(cwd)
    why = why_execd(env)
    if why is None and (server := _get_server()) is not None:
        try:
            run_figures.record(f"{run_figures.COMMANDS}: forked")
            return server.run(args, cwd, env, timeout)
        except ServerGone as exc:
            print(f"command fork server gone, running commands exec'd: {exc}", file=sys.stderr)
            why = "fork server gone"
    return exec_run(args, cwd=cwd, env=env, timeout=timeout, why=why)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
