"""What the simulator's route parts (catalog.py, generation.py, metrics.py) read of its
``AppState`` (http_app.py): a narrow port, so that they hold no reference back to the module
that builds them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import argparse

    from server_control.sim.logfmt import Logger
    from server_control.sim.scheduler import Scheduler


class AppView(Protocol):
    args: argparse.Namespace
    scheduler: Scheduler
    log: Logger
    model_name: str
    started: float
