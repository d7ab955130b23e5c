"""Callbacks subscribed to a publisher's topics (a session's "snapshot"/"logs", a fleet's
"member:NAME"/"gateway"); a subscriber's bug never stops the publisher."""

from __future__ import annotations

import logging
from collections.abc import Callable

Callback = Callable[[str], None]


class Subscribers:
    def __init__(self, log: logging.Logger | None = None) -> None:
        self._callbacks: list[Callback] = []
        self._log = log  # where a failing subscriber is reported (None: not at all)

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Add ``callback(topic)``; returns a function that unsubscribes it."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def publish(self, topic: str) -> None:
        for cb in list(self._callbacks):
            try:
                cb(topic)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not stop the publisher
                if self._log is not None:
                    self._log.exception("subscriber failed")
