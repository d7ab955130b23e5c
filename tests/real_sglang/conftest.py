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


# The tests that share a server across modules, in the order that starts each once (each
# entry: module, then the start of the test's name in it; a test takes the entry with its
# longest match). They run after the rest of the tier, in this order; pytest's order
# within an entry. rig-e2e (``specconsole launch``): test_patched_e2e.py's scenario, the
# console's test before its last step (the stop); then the pool (rig/pool.py):
# trained-plain: the switch tests' reference, then gpu-check's plain server;
# trained-patched-overlap: gpu-check's, then the switch tests'; random-plain-seeded: the
# switch tests' reference, then the sampling tests' seeded and greedy references;
# trained-patched: the switch tests' TestTrained, then its negative control (draft-extend
# skipped for the probe on the same server: rig/skip_draft_extend.py), the same for
# trained-patched-overlap; random-patched-overlap-seeded: the sampling tests', then the
# switch tests' TestRandomOverlap and its exploration. The heavy TestRandom comes last.
SHARED_ORDER = (
    ("test_patched_e2e.py", ""),  # starts rig-e2e
    ("test_console_real.py", ""),
    ("test_patched_e2e.py", "test_stop_leaves_no_process"),
    ("test_switch_exact.py", "TestTrainedOverlap::test_plain_reference"),  # starts trained-plain
    ("test_gpu_check_cpu.py", "test_gpu_check_passes_on_the_cpu_rig"),  # starts trained-patched-overlap
    ("test_switch_exact.py", "TestTrainedOverlap::"),
    ("test_switch_exact.py", "TestTrainedOverlapNegativeControl::"),
    ("test_switch_exact.py", "TestTrained::"),
    ("test_switch_exact.py", "TestTrainedCatchUp::"),
    ("test_switch_exact.py", "TestTrainedNegativeControl::"),
    ("test_switch_exact.py", "TestRandomOverlap::test_plain_reference"),  # starts random-plain-seeded
    ("test_sampling_exact.py", "test_seeded_references"),
    ("test_sampling_exact.py", "test_the_chi_square_test_catches"),  # heavy
    ("test_sampling_exact.py", ""),  # its first test starts random-patched-overlap-seeded
    ("test_switch_exact.py", "TestRandomOverlap"),  # and its exploration
    ("test_switch_exact.py", "TestRandom::"),  # heavy: random-patched-seeded
)


def _shared_rank(item) -> int | None:
    module, _, name = item.nodeid.partition("::")
    module = module.rpartition("/")[2]
    found = [(len(start), i) for i, (m, start) in enumerate(SHARED_ORDER) if m == module and name.startswith(start)]
    return max(found)[1] if found else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """SHARED_ORDER's tests moved to the end, in its order (the one real-server worker of
    ``--dist loadgroup`` runs its group in collection order)."""
    ranked = [(rank, i, item) for i, item in enumerate(items) if (rank := _shared_rank(item)) is not None]
    if ranked:
        moved = {id(item) for _, _, item in ranked}
        items[:] = [item for item in items if id(item) not in moved] + [item for _, _, item in sorted(ranked)]


@pytest.fixture(scope="session")
def servers(rig, tmp_path_factory):
    """The session's rig servers, one alive at a time, shared by the modules (rig/pool.py);
    a server handed to another module is reset and checked first (rig/reuse.py)."""
    from tests.real_sglang.rig import reuse
    from tests.real_sglang.rig.pool import OneAtATime

    shared = OneAtATime(rig, tmp_path_factory.mktemp("rig-servers"), SERVER_LIFETIME_S, on_reuse=reuse.reset)
    yield shared
    shared.close()
    report("rig servers ready (s)", **{k.replace("-", "_"): v for k, v in shared.ready_s.items()})
    for name, user in shared.reused:
        report("rig server reused", server=name, by=user.rpartition(".")[2])
    assert shared.left == [], f"processes left: {shared.left}"


@pytest.fixture(scope="session")
def e2e_run(rig, tmp_path_factory):
    """The patched server (tp 1, threshold 2) launched through ``specconsole launch``:
    test_patched_e2e.py's scenario, which stops it (``specconsole stop``) in its last test,
    and test_console_real.py's Pilot test before that stop (SHARED_ORDER)."""
    from tests.real_sglang.rig.profiles import CliRun
    from tests.real_sglang.rig.server import rss_mb

    t0 = time.monotonic()
    run = CliRun(rig, tmp_path_factory.mktemp("patched"), threshold=2, lifetime_s=SERVER_LIFETIME_S)
    try:
        run.server.wait_ready(timeout_s=120)
        pids = run.server.processes()
        rss = rss_mb(pids)
        report(
            "patched server via specconsole launch",
            ready_s=time.monotonic() - t0,
            processes=len(pids),
            rss_total_mb=sum(rss.values()),
            rss_max_mb=max(rss.values()),
        )
        yield run
    finally:
        left = run.close()
        assert left == [], f"processes left: {left}"


@pytest.fixture
def pool(servers, request):
    """The shared pool, asked for by this test's module (its own ``cache``)."""
    servers.user = request.module.__name__
    return servers


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
