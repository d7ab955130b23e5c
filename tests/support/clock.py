"""A wall clock stepped for tests (NTP, a VM resumed): psutil's epoch start times move."""

from __future__ import annotations

import psutil

EPOCH_START = psutil.Process.create_time
BOOT_TIME = psutil.boot_time


def step_wall_clock(monkeypatch, by_s: float) -> None:
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: EPOCH_START(self) + by_s)
    monkeypatch.setattr(psutil, "boot_time", lambda: BOOT_TIME() + by_s)
