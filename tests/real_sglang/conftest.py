"""Fixtures of the real-SGLang-on-CPU tier (tests/real_sglang/rig is the rig itself)."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

SGLANG_MISSING = importlib.util.find_spec("sglang") is None
SKIP_NO_SGLANG = pytest.mark.skipif(
    SGLANG_MISSING, reason="sglang is not importable here: the real-SGLang tier needs "
    "`pip install -e '.[sglang]'` (scripts/test does it)")
# Every rig server dies on its own after this long, whatever happens to the test run.
SERVER_LIFETIME_S = int(os.environ.get("SPECCONSOLE_RIG_SERVER_LIFETIME", "1500"))


@pytest.fixture(scope="session")
def rig():
    if SGLANG_MISSING:
        pytest.skip("sglang is not importable: cannot build the rig's tiny models")
    from tests.real_sglang.rig.build import ensure_rig

    return ensure_rig()


@pytest.fixture(scope="session")
def rig_python() -> str:
    """The interpreter that has sglang (the one running the tests)."""
    return sys.executable


FIGURES: list[str] = []


def report(name: str, **numbers) -> None:
    """Record measured figures; printed in the terminal summary of the run."""
    text = ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in numbers.items())
    FIGURES.append(f"{name}: {text}")


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("real SGLang on CPU: measured figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


def log_dir(tmp_path_factory, name: str) -> Path:
    return tmp_path_factory.mktemp(name)


@contextlib.contextmanager
def cli_server(rig, work: Path, figure: str, ready_timeout_s: float = 120, **kwargs):
    """A rig server launched with ``specconsole launch`` (``CliRun(rig, work, **kwargs)``),
    ready; its start-up time reported as ``figure``; stopped, leaving no process."""
    from tests.real_sglang.rig.profiles import CliRun

    t0 = time.monotonic()
    run = CliRun(rig, work, lifetime_s=SERVER_LIFETIME_S, **kwargs)
    try:
        run.server.wait_ready(timeout_s=ready_timeout_s)
        report(figure, ready_s=time.monotonic() - t0)
        yield run
    finally:
        assert run.close() == []
