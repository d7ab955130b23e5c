"""The simulator's main process: parse flags, spawn the TP ranks, serve HTTP."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from server_control.protocol import runtime_settings
from server_control.sim import args as simargs
from server_control.sim.logfmt import Logger

if TYPE_CHECKING:
    from server_control.sim.rank_objects import LightRankGroup
    from server_control.sim.rank_processes import RankGroup


def bind_socket(host: str, port: int) -> socket.socket:
    """Reserve the port now (not listening yet: connections are refused until serving)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: with protocol 0 asyncio does not set TCP_NODELAY on accepted
    # connections, and every small JSON answer then waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(port_in_use(host, port)) from None
        raise SystemExit(f"error: cannot bind {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def port_in_use(host: str, port: int) -> str:
    return f"error: port {port} is already in use on {host}; choose another --port or stop what is listening there"


def bind_late(host: str, port: int) -> socket.socket | str:
    """``--sim-bind-late``: bind where SGLang does, once the model has loaded. The socket, or
    the line uvicorn logs when that fails: asyncio's own words for a failed bind
    (``base_events.create_server``), which uvicorn's startup logs at ERROR before its HTTP
    server ends."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    address = (host, port) if family == socket.AF_INET else (host, port, 0, 0)
    try:
        sock.bind(address)
        sock.listen()  # now, as uvicorn does: a second binder of the port loses here
    except OSError as exc:
        sock.close()
        return f"[Errno {exc.errno}] error while attempting to bind on address {address!r}: {(exc.strerror or str(exc)).lower()}"
    sock.set_inheritable(False)
    return sock


def linger(deadline: float | None) -> int:
    """SGLang after uvicorn lost its port: the HTTP server is gone, the process is not. Wait
    for SIGTERM or SIGINT (or ``--sim-max-lifetime``) with the ranks still up."""
    import threading

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        if deadline is not None and time.time() >= deadline:
            break
    return 1


RANK_GRACE_S = 5.0


def rank_config(a: argparse.Namespace, deadline: float | None) -> dict[str, Any]:
    return {
        "tp_size": a.tp_size,
        "time_scale": a.sim_time_scale,
        "load_time": a.sim_load_time,
        "spec": bool(a.speculative_algorithm),
        "max_total_tokens": a.max_total_tokens,
        "max_running_requests": a.max_running_requests,
        "context_length": a.context_length,
        "settings": {s.field: getattr(a, s.key) for s in runtime_settings.SETTINGS},  # the switch's
        "off_reason": simargs.off_reason(a),
        "explore_share": simargs.explore_share(a),
        # ranks outlive the main process's own deadline by a grace period, so a normal
        # shutdown stops them first; orphans still go at deadline + grace
        "deadline": None if deadline is None else deadline + RANK_GRACE_S,
    }


def uvicorn_log_config(level: str) -> dict[str, Any]:
    from uvicorn.config import LOGGING_CONFIG

    cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in LOGGING_CONFIG.items()}
    cfg["formatters"] = {k: dict(v, use_colors=False) for k, v in LOGGING_CONFIG["formatters"].items()}
    return cfg


async def serve(
    a: argparse.Namespace,
    sock: socket.socket,
    ranks: RankGroup | LightRankGroup,
    log: Logger,
    deadline: float | None,
    argv: list[str],
) -> int:
    import uvicorn

    from server_control.sim.http_app import AppState, build_app
    from server_control.sim.scheduler import Scheduler

    loop = asyncio.get_running_loop()
    exit_code = 0
    stopping = asyncio.Event()

    def stop(code: int = 0) -> None:
        nonlocal exit_code
        exit_code = exit_code or code
        stopping.set()

    def deliver(waiters: list[asyncio.Event]) -> None:
        loop.call_soon_threadsafe(_set_all, waiters)

    def on_fatal(code: int, message: str) -> None:
        def fatal() -> None:
            log.error(message)
            stop(code)

        loop.call_soon_threadsafe(fatal)

    sched = Scheduler(a, ranks, log, deliver, on_fatal)
    launch = shlex.join([sys.executable, "-m", "server_control.sim", *argv])
    state = AppState(a, sched, log, launch)
    app = build_app(state)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # our own handlers below; no re-raise after shutdown
            yield

    config = uvicorn.Config(
        app,
        log_config=uvicorn_log_config(a.log_level),
        log_level=a.log_level,
        access_log=True,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )
    server = Server(config)

    def stop_signal() -> None:
        sched.request_stop()  # the ranks go down with the group: the scheduler must not call it a failure
        stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_signal)
    try:
        # SO_REUSEADDR lets two not-yet-listening sockets bind one port: whoever listens
        # second loses, so a server started at the same time on the same port ends here
        sock.listen(config.backlog)
    except OSError as exc:
        print(
            port_in_use(a.host, a.port)
            if exc.errno == errno.EADDRINUSE
            else f"error: cannot listen on {a.host}:{a.port}: {exc.strerror or exc}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    sched.start()
    serve_task = asyncio.create_task(server.serve(sockets=[sock]))

    async def warm_up() -> None:
        while not server.started:
            if serve_task.done():
                return
            await asyncio.sleep(0.01)
        logging.getLogger("uvicorn.error").info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", a.host, a.port)
        await asyncio.sleep((0.5 + a.sim_slow_start) / a.sim_time_scale)
        req = sched.new_request(4, 1)
        await state.generator._drain(req)
        # SGLang's warm-up request goes through HTTP; its access line looks like this
        sys.stdout.write(f'INFO:     127.0.0.1:{40000 + os.getpid() % 20000} - "POST /generate HTTP/1.1" 200 OK\n')
        sys.stdout.flush()
        state.ready = True
        sched.mark_ready()
        log.info("The server is fired up and ready to roll!")

    async def lifetime(deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.time()))
        log.info(f"Simulator reached --sim-max-lifetime ({a.sim_max_lifetime:g} s); shutting down.")
        stop(0)

    tasks = [asyncio.create_task(warm_up())]
    if deadline is not None:
        tasks.append(asyncio.create_task(lifetime(deadline)))
    stop_wait = asyncio.create_task(stopping.wait())
    await asyncio.wait([serve_task, stop_wait], return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    for t in tasks:
        t.cancel()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(serve_task, timeout=5)
    stop_wait.cancel()
    sched.stop()
    return exit_code


def _set_all(waiters: list[asyncio.Event]) -> None:
    for w in waiters:
        w.set()


def main(argv: list[str] | None = None, prog: str = simargs.PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a, unknown = simargs.parse_args(argv, prog)
    log = Logger("")
    if unknown:
        log.warning(f"WARNING: the simulator ignores unrecognized arguments: {shlex.join(unknown)}")
    sock = None if a.sim_bind_late else bind_socket(a.host, a.port)
    if sock is not None:
        a.port = sock.getsockname()[1]  # --port 0: the kernel's choice
    deadline = time.time() + a.sim_max_lifetime if a.sim_max_lifetime > 0 else None
    log.info(f"server_args={simargs.server_args_repr(a)}")
    logging.getLogger("asyncio").setLevel(logging.ERROR)

    from server_control.sim.rank_processes import RankError, RankGroup

    ranks: RankGroup | LightRankGroup
    if a.sim_light:
        from server_control.sim.rank_objects import LightRankGroup

        ranks = LightRankGroup(a.tp_size, rank_config(a, deadline))
    else:
        ranks = RankGroup(a.tp_size, rank_config(a, deadline))
    try:
        ranks.wait_ready(timeout=60 + 1.5 * a.sim_load_time / a.sim_time_scale)
        if sock is None:
            bound = bind_late(a.host, a.port)
            if isinstance(bound, str):
                log.error(f"ERROR:    {bound}")  # as SGLang's log shows uvicorn's line
                return linger(deadline)
            sock = bound
            a.port = sock.getsockname()[1]
        code = asyncio.run(serve(a, sock, ranks, log, deadline, argv))
    except RankError as exc:
        log.error(f"Initialization failed: {exc}")
        code = 1
    except KeyboardInterrupt:
        code = 130
    finally:
        ranks.stop()
    return code
