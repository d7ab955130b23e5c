"""Target-only steps above the cold mark skip the draft's extend, on SGLang's own path.

SGLang 0.5.23 reads ``envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`` at every steps=0 decode
step (``EAGLEWorkerV2.forward_batch_generation``: ``self.speculative_num_steps == 0 and
envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get()``) and, when it says yes, runs
``_stub_skipped_draft_extend`` instead of the draft's extend: zeroed draft inputs of the
right shape, no draft forward, no draft KV writes. A whole server with the variable set
skips it at every target-only step. ``patch(envs)`` makes that one read also say yes in a
step the switch marked cold: SGLang calls ``activate_step_by_batch`` inside
``forward_batch_generation`` before it reads the variable, and the patched one ``mark``s the
step (``decision.SpecSwitch.draft_cold``: target-only with a decode batch above
``cold_draft_above``); the patched ``forward_batch_generation`` runs inside ``step()``, which
clears the mark when the forward ends, so it never outlives its step (a prefill forward,
which never asks, runs warm). So the cold step is the very code path SGLang ships, and the warm
one (every other step, and every step with the mark at 0) is untouched. Without the patch
applied (SGLang moved the variable) no step is marked cold: the worker asks ``patched()``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger("sglang.srt.speculative.eagle_worker_v2")
SGLANG_ENV = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
MARK = "_specconsole_cold_draft"
UNAVAILABLE_LINE = (
    "Dynamic speculation: cold draft unavailable ({why}): target-only steps keep the draft warm whatever cold_draft_above says"
)
_patched: list[bool] = [False]


def patched() -> bool:
    return _patched[0]


class Step:
    """One forward: whether a decode step inside it was marked cold."""

    __slots__ = ("cold",)

    def __init__(self) -> None:
        self.cold = False


_step: list[Step | None] = [None]  # the forward now running (one patched worker per process)


def mark(cold: bool) -> None:
    """The decode step now deciding (``activate_step_by_batch``) skips the draft's extend."""
    if _step[0] is not None:
        _step[0].cold = cold


def _cold_now() -> bool:
    current = _step[0]
    return current is not None and current.cold


@contextmanager
def step() -> Iterator[Step]:
    """Around one ``forward_batch_generation``: no mark before it, none left after it; the
    ``Step`` says afterwards whether it ran cold (the forwards' count)."""
    _step[0] = current = Step()
    try:
        yield current
    finally:
        _step[0] = None


def patch(envs: Any) -> None:  # SGLang's Envs instance, as eagle_worker_v2 imports it
    """Have SGLang's read of the variable also say yes on a cold step (once per process)."""
    field = getattr(type(envs), SGLANG_ENV, None)  # the EnvBool itself (a plain class attribute)
    own_get = getattr(field, "get", None)
    if field is None or not callable(own_get):
        logger.warning(UNAVAILABLE_LINE.format(why=f"SGLang has no envs.{SGLANG_ENV}"))
        return
    if not getattr(own_get, MARK, False):

        def get() -> Any:
            return True if _cold_now() else own_get()

        setattr(get, MARK, True)
        field.get = get
    _patched[0] = True
