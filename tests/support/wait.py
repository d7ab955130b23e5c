"""Polling helpers for tests: wait for a condition with a deadline, fail naming it (``wait_for``
blocking, ``until`` on the event loop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float = 60.0, interval: float = 0.05, what: str = "condition") -> T:
    """Poll ``cond`` until it returns a truthy value; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def until(cond: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> None:
    """``wait_for`` on the event loop: await until ``cond()`` is truthy."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


async def supervised_until(sup, cond: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> None:
    """Run ``sup.watch()`` (a ``Supervisor``'s loop) until ``cond()`` holds, then cancel it."""
    watch = asyncio.create_task(sup.watch())
    try:
        await until(cond, timeout=timeout, what=what)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
