"""Shared set-up for tests against the real sglang==0.5.23 package (marker ``sglang``).

The import hook is installed here, before any test module imports SGLang, exactly as the
bootstrap does in a server process. Nothing here imports SGLang at import time: each test
module skips through ``pytest.importorskip`` when sglang is not installed.
"""

import logging

import pytest

from server_control.sglang_patch import gate, hook

hook.install()

SPEC = dict(speculative_algorithm="EAGLE3", speculative_eagle_topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4)


@pytest.fixture
def publish(caplog):
    """Publish a real resolved ServerArgs (SGLang's own test helper) for the worker:
    ``publish(**fields)`` -> the installed ServerArgs; restored after the test."""
    from sglang.srt.runtime_context import get_context

    from tests.sglang.objects import require_patched_server_args

    require_patched_server_args()
    caplog.set_level(logging.INFO)
    gate._reported = None  # one NOT-active line per process: start each test fresh
    gate._pending.clear()
    installed = []

    def _publish(**fields):
        override = get_context().override_server_args(**{**SPEC, **fields})
        server_args = override.install()
        installed.append(override)
        return server_args

    yield _publish
    for override in reversed(installed):
        override.restore()
    gate._reported = None


def lines(caplog, text: str) -> list[str]:
    """The messages of the log records containing ``text``."""
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]
