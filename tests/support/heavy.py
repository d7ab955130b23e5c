"""The heavy tier: tests kept out of CI's run for its time (2 cores, a 45-minute budget),
run by hand with ``SPECCONSOLE_HEAVY_TESTS=1 scripts/test`` (README, "Tests"). Each is a
repeat or a negative control of what a CI test proves on a cheaper server; docs/cpu-rig.md
lists them with their last run."""

from __future__ import annotations

import os

import pytest

HEAVY_ENV = "SPECCONSOLE_HEAVY_TESTS"


def heavy_on() -> bool:
    return os.environ.get(HEAVY_ENV) == "1"


def heavy(what: str) -> pytest.MarkDecorator:
    """Skip unless the heavy tier is asked for; ``what`` says why it is heavy (it is shown)."""
    return pytest.mark.skipif(not heavy_on(), reason=f"heavy tier ({what}): set {HEAVY_ENV}=1 to run it")
