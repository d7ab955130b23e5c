"""Fixtures of the real-SGLang-on-CPU tier (tests/real_sglang/rig is the rig itself)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.support import run_figures

SGLANG_MISSING = importlib.util.find_spec("sglang") is None
SKIP_NO_SGLANG = pytest.mark.skipif(
    SGLANG_MISSING,
    reason="sglang is not importable here: the real-SGLang tier needs `pip install -e '.[sglang]'` (scripts/test does it)",
)
# Every rig server dies on its own after this long, whatever happens to the test run.
SERVER_LIFETIME_S = int(os.environ.get("SPECCONSOLE_RIG_SERVER_LIFETIME", "1500"))


@pytest.fixture(scope="session")
def rig():
    """The built rig. At the end of the run its figures say whether this run found the
    rig and its model pairs in the cache or built them (CI: a cold cache pays the training)."""
    if SGLANG_MISSING:
        pytest.skip("sglang is not importable: cannot build the rig's tiny models")
    from tests.real_sglang.rig.build import MODEL_KINDS, ensure_rig

    t0 = time.monotonic()
    built = ensure_rig()
    rig_s = time.monotonic() - t0
    cached = {k for k in MODEL_KINDS if _facts(built.root, k) is not None}
    yield built
    pairs: dict[str, object] = {}
    for kind in MODEL_KINDS:
        facts = _facts(built.root, kind)
        if facts is not None:
            pairs[kind] = "cached" if kind in cached else "built in this run"
            for key in ("build_s", "train_s"):  # the build's wall time; a training's (no kept weights)
                if kind not in cached and key in facts:
                    pairs[f"{kind}_{key}"] = float(facts[key])
            if kind not in cached and "weights" in facts:
                pairs[f"{kind}_weights"] = facts["weights"]
    report(f"rig build ({built.root})", rig_s=rig_s, **pairs)


def _facts(root: Path, kind: str) -> dict | None:
    path = root / "models" / kind / "facts.json"
    return json.loads(path.read_text()) if path.is_file() else None


@pytest.fixture(scope="session")
def rig_python() -> str:
    """The interpreter that has sglang (the one running the tests)."""
    return sys.executable


def report(name: str, **numbers) -> None:
    """Record measured figures; printed in the terminal summary of the run (tests/conftest.py)."""
    text = ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    run_figures.record(f"{name}: {text}")


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
