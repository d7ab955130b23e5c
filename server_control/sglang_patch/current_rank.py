"""This process's ``DynamicSpeculation`` (worker.py; one patched scheduler per process): set
by the patched ``EAGLEWorkerV2.__init__`` (targets/eagle_worker_v2.py), read by what runs
outside the worker's own calls (the metrics, the lazy draft head's check)."""

from __future__ import annotations

from server_control.sglang_patch.sglang_shapes import RankState

_current: list[RankState | None] = [None]


def current() -> RankState | None:
    """This process's DynamicSpeculation, or None (no patched worker here)."""
    return _current[0]


def set_current(dyn: RankState) -> None:
    """The patched ``EAGLEWorkerV2.__init__`` made ``dyn``."""
    _current[0] = dyn
