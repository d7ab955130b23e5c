"""A Supervisor launched from a profile with its watch running, ready (the runs tests' set-up)."""

from __future__ import annotations

import asyncio

from server_control.config.profile import load_profile
from server_control.model.vocabulary import RunState
from server_control.supervision.supervisor import Supervisor
from tests.support.wait import until


async def launched_and_watched(path, groups) -> tuple[Supervisor, asyncio.Task]:
    """Launch the profile at ``path`` (its group recorded in ``groups``), start the watch and
    wait until ready; the caller cancels the watch and stops the run."""
    sup = Supervisor(load_profile(path))
    rec = await sup.launch()
    groups.add(rec.pgid)
    watch = asyncio.create_task(sup.watch())
    await until(lambda: sup.state == RunState.READY, what="ready")
    return sup, watch
