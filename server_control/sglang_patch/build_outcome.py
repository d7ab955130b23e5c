"""A steps=0 build that fails on one rank ends every rank's server within seconds.

The ranks agreed to build (rank_agreement.py), so a rank whose build fails leaves the
others where they are: after their own build (they reach ``confirm_built``) or still inside
it, in one of its collectives (each CUDA-graph capture does a ``barrier()`` on the TP CPU
group; pynccl and NCCL waits have no timeout, gloo's is SGLang's). Every rank's outcome goes
through the world group's key-value store (``built/<rank>``: null, or the failure):

  * ``confirm_built``, after the build on every rank that returns from it: each reports,
    then waits for every other rank to have reported or to have said it saw the failure
    from inside its build (``seen/<rank>``), bounded by the agreement timeout. A failure
    anywhere raises ``BuildFailed`` on every rank that gets here, with one line naming each
    rank's outcome: SGLang's scheduler then stops the server (``run_scheduler_process``
    signals its parent).
  * ``BuildWatch``, on every rank while its build runs: a thread polls the store; when
    another rank reported a failure and this rank's build has not returned ``ESCAPE_S``
    later, this rank is inside one of the build's collectives and will not get out. It logs
    the same line, says so (``seen``), waits (bounded) for every rank to have logged it, and
    ends its server as SGLang's scheduler does on an error: SIGQUIT to its parent, whose
    handler ends the process tree (on a node of several, that node's). The failing rank
    does not wait for a rank that cannot answer; no node is left in a collective.

Before the watch, the failing rank waited the agreement timeout (120 s) for the stuck
ranks, and across nodes the other node's ranks waited in the collective for as long as its
timeout allows (gloo's: SGLang's 120 minutes; pynccl's: none).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from server_control.sglang_patch import rank_agreement
from server_control.sglang_patch.sglang_shapes import GroupCoordinator, RankState, Store

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")

SEEN_WAIT_S = 10.0  # a rank that logged the failure waits this long for the others to log it
POLL_S = 0.2
ESCAPE_S = 2.0  # a build that returns this soon after another rank's failure reaches confirm_built
STUCK = "was still inside its build (a collective the failed rank never joined)"
MISSING = object()  # no report from that rank (yet)


class BuildFailed(RuntimeError):
    """The steps=0 build failed on a rank after every rank agreed to build: the server
    stops (the other ranks may be inside a collective of the build)."""


def message(outcomes: dict[int, object], stuck: set[int], timeout: float) -> str | None:
    """The one line every rank logs (None: every rank built). ``outcomes``: rank -> its
    failure, or None (built), or ``MISSING`` (no report); ``stuck``: ranks that said they
    saw the failure from inside their build."""
    problems = []
    for rank in sorted(outcomes):
        outcome = outcomes[rank]
        if rank in stuck and (outcome is MISSING or outcome is None):
            problems.append(f"TP{rank} {STUCK}")
        elif outcome is MISSING:
            problems.append(f"TP{rank} did not finish its build within {timeout:.0f} s")
        elif outcome is not None:
            problems.append(f"TP{rank}: {outcome}")
    if not problems:
        return None
    return (
        "the target-only (steps=0) build failed after every TP rank agreed to build ("
        + "; ".join(problems)
        + "); stopping the server: a rank that fails inside a "
        "build may leave the others inside one of its collectives"
    )


class _Exchange:
    """The store's keys of one build run of one TP group."""

    def __init__(self, group: GroupCoordinator, store: Store, run: int) -> None:
        self.group, self.store, self.run = group, store, run
        self.me, self.world = group.rank_in_group, group.world_size

    def key(self, what: str, rank: int) -> str:
        return rank_agreement._key(self.group, f"{what}/{rank}", self.run)

    def has(self, what: str, rank: int) -> bool:
        return bool(self.store.check([self.key(what, rank)]))

    def outcome(self, rank: int) -> object:
        return json.loads(self.store.get(self.key("built", rank))) if self.has("built", rank) else MISSING

    def others(self) -> list[int]:
        return [i for i in range(self.world) if i != self.me]

    def stuck(self) -> set[int]:
        return {i for i in self.others() if self.has("seen", i) and not self.has("built", i)}

    def log_and_wait_for_the_others(self, line: str) -> None:
        """Log ``line``, say so, and wait (bounded) until every rank has logged it: the
        first rank to end makes SGLang end the process tree, which cut a rank off before
        its line (CI: TP1's missing)."""
        logger.error(f"Dynamic speculation: {line}")
        self.store.set(self.key("seen", self.me), "1")
        if self.world > 1:
            try:
                keys = [self.key("seen", i) for i in range(self.world)]
                self.store.wait(keys, datetime.timedelta(seconds=SEEN_WAIT_S))
            except Exception:  # noqa: BLE001 - best effort: the server stops next whatever the others saw
                pass


def confirm_built(dyn: RankState, failure: str | None) -> None:
    """AFTER the build, on every rank that returns from it (module docstring)."""
    group = rank_agreement.tp_group()
    if group is None:
        if failure is not None:
            raise BuildFailed(failure)
        return
    ex = _Exchange(group, rank_agreement.default_store(), getattr(dyn, "run", 1))
    ex.store.set(ex.key("built", ex.me), json.dumps(failure))
    timeout = rank_agreement.timeout_s()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(ex.has("built", i) or ex.has("seen", i) for i in ex.others()):
            break
        time.sleep(POLL_S)
    outcomes = {i: ex.outcome(i) for i in ex.others()}
    outcomes[ex.me] = failure
    line = message(outcomes, ex.stuck(), timeout)
    if line is None:
        return
    ex.log_and_wait_for_the_others(line)
    raise BuildFailed(line)


def end_server() -> None:
    """As SGLang's scheduler ends a server on an error (``run_scheduler_process``): SIGQUIT
    to its parent, whose handler ends the process tree."""
    os.kill(os.getppid(), signal.SIGQUIT)


class BuildWatch:
    """While this rank builds: ends its server when another rank's build failed and this
    one cannot get out of its build (module docstring). ``end``: how (tests pass their own)."""

    def __init__(self, group: GroupCoordinator, store: Store, run: int, end: Callable[[], None] = end_server) -> None:
        self.ex = _Exchange(group, store, run)
        self.end = end
        self.returned = threading.Event()
        self.ended = False
        self.thread = threading.Thread(target=self._watch, name="specconsole-build-watch", daemon=True)

    def __enter__(self) -> BuildWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.returned.set()
        self.thread.join(timeout=SEEN_WAIT_S + ESCAPE_S + 1)

    def _watch(self) -> None:
        ex = self.ex
        try:
            while not self.returned.wait(POLL_S):
                failed = [i for i in ex.others() if ex.outcome(i) not in (None, MISSING)]
                if not failed:
                    continue
                if self.returned.wait(ESCAPE_S):
                    return  # the build returned: confirm_built says it
                outcomes = {i: ex.outcome(i) for i in ex.others()}
                outcomes[ex.me] = MISSING
                line = message(outcomes, ex.stuck() | {ex.me}, rank_agreement.timeout_s())
                assert line is not None  # a rank failed
                ex.log_and_wait_for_the_others(line)
                self.ended = True
                self.end()
                return
        except Exception as exc:  # noqa: BLE001 - the watch never raises into the build: said, then it stops
            logger.warning(
                f"Dynamic speculation: the build watch stopped ({exc!r}); a failed build elsewhere is seen after this rank's"
            )


@contextmanager
def watching(dyn: RankState) -> Iterator[BuildWatch | None]:
    """A ``BuildWatch`` around the build when there is a TP group to watch, else nothing."""
    group = rank_agreement.tp_group()
    if group is None:
        yield None
        return
    try:
        store = rank_agreement.default_store()
    except RuntimeError:
        yield None  # the agreement had the store; without it the build is not watched
        return
    with BuildWatch(group, store, getattr(dyn, "run", 1)) as watch:
        yield watch
