"""Signals held back while a command finishes what it started.

``stop`` interrupted in its grace (SIGHUP from a dropped ssh link, SIGTERM, Ctrl-C) used to
exit at once: the SIGKILL after the grace was never sent, a process that ignored SIGTERM
kept running, and the record said "stopping" for ever. Inside ``deferred()`` those signals
are noted instead; when the block ends the command says which one came and exits with
128 + its number, as it would have, but only after its work is done.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

DEFERRED = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def deferred(what: str) -> Iterator[list[int]]:
    """Hold SIGHUP, SIGINT and SIGTERM inside the block; yields the list of those that came."""
    got: list[int] = []

    def note(signum: int, _frame: object) -> None:
        got.append(signum)

    old = {sig: signal.signal(sig, note) for sig in DEFERRED}
    try:
        yield got
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if got:
            try:
                print(
                    f"specconsole: finished the {what} before acting on {signal.Signals(got[0]).name}",
                    file=sys.stderr,
                    flush=True,
                )
            except OSError:
                pass  # the terminal went with the ssh link


def exit_code(got: list[int], code: int) -> int:
    """The command's exit code: 128 + the first held signal's number, else ``code``."""
    return 128 + got[0] if got else code
