"""The Session API, in one place: what the screen, the headless commands and the fleet
may use of a session. ``server_control.session.session.Session`` implements it over a real
server; the console's tests implement it over fixed data.

    session = Session.for_profile(profile, state_dir=None, supervise=True)  # adopts a live run
    session = Session.attach(url, log_path=None, api_key=None, admin_api_key=None)
    await session.start()            # follow the log, poll HTTP, sample NVML, supervise (if owned)
    unsubscribe = session.subscribe(callback)   # callback(topic) on the event loop:
                                     #   "snapshot" (a poll, an NVML sample, a run or setting change)
                                     #   "logs" (new records in session.store)
    session.snapshot()               # SessionSnapshot (server_control/model/snapshot.py); .to_json()
                                     #   is what `specconsole status --json` prints
    session.store                    # LogStore (server_control/logs/store.py)
    await session.launch() | stop() | restart() | set_threshold(n) | set_force(mode) | verify()
    await session.set_setting(key, value)   # any runtime setting by its server-argument name
                                     #   (hysteresis, dwell: the flapping suggestion), like N
                                     # -> OperationResult (server_control/model/operation.py):
                                     #   outcome done | refused | failed, message, details
    await session.close(stop_server=False)   # the server keeps running unless asked

An attached session (no profile) refuses launch/stop/restart: it does not own the server.
Headless commands pass ``supervise=False`` so they never take over restarting a run (the run
state is then judged from the leader process and the HTTP poll); ``poll_interval_s``
(default 1.0) sets the poll period of either kind.

What the headless commands and the fleet ask beyond the screen is in the protocol too (no
caller reaches into ``session.control`` or ``session.poller``):

    session.verification()           # the Verification now, synchronously
    session.polls                    # HTTP polls finished so far
    session.poke()                   # poll now
    await session.read_settings()    # every rank's runtime settings as the server shows them
    session.prepare_control()        # make the setting client now (the fleet, before a change)
    session.log_caught_up(size_at=None)   # the log read up to that size

NVML updates come from the sampler thread and reach subscribers on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from server_control.advice.words import Advice
from server_control.logs import LogStore
from server_control.model.operation import OperationResult
from server_control.model.snapshot import SessionSnapshot
from server_control.model.verification import Verification
from server_control.state.history import Recorded

Topic = str  # "snapshot" | "logs"


@runtime_checkable
class SessionLike(Protocol):
    url: str
    store: LogStore

    def subscribe(self, callback: Callable[[Topic], None]) -> Callable[[], None]: ...

    def snapshot(self) -> SessionSnapshot: ...

    async def start(self) -> None: ...

    async def close(self, stop_server: bool = False) -> None: ...

    async def launch(self) -> OperationResult: ...

    async def stop(self) -> OperationResult: ...

    async def restart(self) -> OperationResult: ...

    async def set_threshold(self, n: object) -> OperationResult: ...

    async def set_force(self, mode: object) -> OperationResult: ...

    async def set_setting(self, key: str, value: object) -> OperationResult: ...

    async def verify(self) -> OperationResult: ...

    def verification(self) -> Verification: ...

    async def advice(self) -> Advice:
        """The advisor's suggestion from this run's server's cost curves; SourceError when it has
        none to give (no answer, no curves, not this run's server)."""
        ...

    @property
    def polls(self) -> int: ...

    def poke(self) -> None: ...

    def history(self) -> Recorded:
        """The profile's recorded history (server_control/state/history.py), oldest first:
        what earlier sessions recorded (up to ``until``), then this session's polls."""
        ...

    async def read_settings(self) -> dict[str, Any]: ...

    def prepare_control(self) -> None: ...

    def log_caught_up(self, size_at: int | None = None) -> bool: ...
