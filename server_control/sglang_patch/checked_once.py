"""Whether an optional part of the patch applies to a worker, decided once and said once.

An optimisation or bookkeeping that is exact only on some set-ups (lazy_draft_head.py,
draft_catch_up.py) lists its conditions as ``(reason it is off, holds)`` pairs; the first
call on a worker evaluates them, logs the part's ON line or its OFF line with every failed
reason, and keeps the verdict on the worker. A set-up that cannot even be read (an
exception) is off, with the exception named: SGLang's own path is then left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")


def checked_once(holder: object, key: str, checks: Callable[[], Iterable[tuple[str, bool]]], on_line: str, off_line: str) -> bool:
    """The verdict kept on ``holder`` under ``key``, else evaluated, logged and kept."""
    kept = vars(holder)
    cached = kept.get(key)
    if cached is not None:
        return bool(cached)
    try:
        failed = [why for why, good in checks() if not good]
    except Exception as exc:  # noqa: BLE001 - an unknown layout: the part stays off, SGLang's path alone
        failed = [f"unknown worker layout: {exc!r}"]
    kept[key] = not failed
    logger.info(on_line if not failed else off_line.format(why=", ".join(failed)))
    return not failed
