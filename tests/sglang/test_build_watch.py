"""A build that fails on one rank while another is inside one of the build's collectives
ends both within seconds: two real processes in a real gloo group on loopback (the world
store of ``init_process_group``, as SGLang's), rank 0 in a ``barrier()`` that rank 1 never
joins (build_watch_probe.py). With ``build_outcome.BuildWatch`` around rank 0's build, rank 0
logs the failure and ends its server (the probe's ``end``), and rank 1 stops waiting for it
at once; the negative control, the same without the watch, leaves rank 0 in the barrier and
rank 1 waiting out the agreement timeout (60 s here): both still there after 8 s."""

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch", reason="needs torch (installed with sglang)")
pytestmark = pytest.mark.sglang

from server_control.host.ports import free_port  # noqa: E402
from server_control.sglang_patch import build_outcome  # noqa: E402
from tests.real_sglang.rig.build import REPO_ROOT  # noqa: E402

LINE = (
    "the target-only (steps=0) build failed after every TP rank agreed to build (TP0 "
    + build_outcome.STUCK
    + "; TP1: RuntimeError('forced build failure')); stopping the server"
)


def _ranks(mode: str) -> list[subprocess.Popen]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), SPECCONSOLE_DYNSPEC_AGREE_TIMEOUT_S="60")
    port = free_port()
    return [
        subprocess.Popen(
            [sys.executable, "-m", "tests.sglang.build_watch_probe", str(rank), str(port), mode],
            env=env,
            cwd=str(REPO_ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for rank in (0, 1)
    ]


def _stop(procs: list[subprocess.Popen]) -> list[tuple[str, str]]:
    out = []
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, 9)
        o, e = p.communicate(timeout=30)
        out.append((o, e))
    return out


def test_the_rank_inside_the_collective_is_ended_and_the_failed_rank_does_not_wait():
    procs = _ranks("watch")
    try:
        t0 = time.monotonic()
        codes = [p.wait(timeout=60) for p in procs]
        took = time.monotonic() - t0
    finally:
        (out0, err0), (out1, err1) = _stop(procs)
    assert codes == [7, 3], (codes, out0, err0[-2000:], out1, err1[-2000:])
    assert "ENDED" in out0 and "BARRIER LEFT" not in out0
    failed = next(line for line in out1.splitlines() if line.startswith("FAILED"))
    seconds = float(failed.split()[1])
    assert seconds < 10, failed  # not the 60-s agreement timeout
    assert LINE in failed, failed
    assert f"Dynamic speculation: {LINE}" in err0  # the stuck rank named the failure too
    assert took < 30, took


def test_negative_control_without_the_watch_both_ranks_wait():
    procs = _ranks("bare")
    try:
        for p in procs:  # both in the group (init_process_group returned)
            assert p.stdout is not None and p.stdout.readline().startswith("READY")
        time.sleep(8)
        alive = [p.poll() is None for p in procs]
    finally:
        (out0, _), (out1, _) = _stop(procs)
    assert alive == [True, True], (alive, out0, out1)  # rank 0 in the barrier, rank 1 waiting for it
    assert "BARRIER LEFT" not in out0 and "FAILED" not in out1
