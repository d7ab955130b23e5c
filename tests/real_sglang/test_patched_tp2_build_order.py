"""The steps=0 build runs collectives (on a GPU each CUDA-graph capture does a barrier on
the TP CPU group per bucket); the tp 2 CPU rig puts a real gloo barrier inside the build
(``SPECCONSOLE_RIG_TP_FAULTS=barrier``, tests/real_sglang/rig/tp_faults.py):

* the negative control: TP1 refuses for a rank-local reason, with the old order (build
  first, then agree): TP0 waits in the build's barrier for TP1, which never comes, and
  the server never gets ready. Bounded: TP1's wait for TP0's verdict is cut to 5 s past
  the 5 s agreement timeout (``verdict_grace=5``; the patch's own grace is 30 s), the test
  waits for TP1 to say its agreement returned (it goes on without a verdict), then holds
  ``HOLD_S`` more: whatever TP1 does after going on, TP0 stays in the barrier and the
  server never gets ready. The new order with the same fault serves:
  test_patched_tp2_disagree.py;
* TP1's build fails after the ranks agreed to build, before the barrier TP0 waits in (a
  rank failing inside a capture while the others are in its collective; heavy tier: CI
  runs the same fault at nnodes 2, one rank a node, test_patched_nnodes2.py): every rank ends
  within ``FAST_S`` (30 s) of TP0 entering the barrier, with the patch's own 120-s agreement
  timeout, the same failure line on both ranks naming TP1's failure and TP0 still inside
  its build (``build_outcome.BuildWatch`` on TP0; "switch off and serve" is not offered,
  TP0 cannot leave the collective). Its negative control (heavy tier; in CI the same
  without a server: tests/sglang/test_build_watch.py): without the watch the server is
  still there after 30 s (TP1 waits out the agreement timeout for TP0's report).
"""

from __future__ import annotations

import re
import sys
import time

import pytest

from server_control.host.ports import free_port
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.build import omp_bind, server_args, server_env
from tests.real_sglang.rig.server import RigServer
from tests.support.heavy import heavy

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(1500)]
HOLD_S = 25  # after TP1 went on (it reaches its next blocking point within ~1 s on the rig)
START_S = 600  # a loaded 2-core machine takes minutes to load two ranks
ENTERED, LEFT = "rig tp_faults: build barrier entered", "rig tp_faults: build barrier left"
RETURNED = "rig tp_faults: agreement returned"


def _lines(text: str, needle: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M):
        if needle in m.group(2):
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def _start(rig, work, faults: str, agree_timeout_s: int | None = 5) -> RigServer:
    """``agree_timeout_s`` None: the patch's own agreement timeout."""
    port = free_port()
    env = server_env(rig)
    env.update({"SPECCONSOLE_RIG_TP_FAULTS": faults, "SGLANG_CPU_OMP_THREADS_BIND": omp_bind(2)})
    if agree_timeout_s is not None:
        env["SPECCONSOLE_DYNSPEC_AGREE_TIMEOUT_S"] = str(agree_timeout_s)
    args = server_args(rig, port, tp=2, extra=["--speculative-disable-batch-threshold", "2"])
    return RigServer.start(
        [sys.executable, "-m", "server_control.sglang_patch.serve", *args],
        env,
        work / "tp2-build-fault.log",
        port,
        lifetime_s=SERVER_LIFETIME_S,
    )


def _wait_for(server: RigServer, needle: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if needle in server.log_text():
            return
        assert server.processes(), f"server exited:\n{server.log_tail()}"
        time.sleep(1)
    raise TimeoutError(f"no {needle!r} within {timeout_s:.0f} s:\n{server.log_tail()}")


@heavy("a negative control of the build order, ~75 s: a hung tp 2 server held on purpose")
def test_negative_control_the_old_order_hangs_the_group(rig, tmp_path):
    """Build first, then agree: TP0 enters the build's barrier, TP1 (refused) never does."""
    server = _start(rig, tmp_path, "barrier,refuse=1,old_order,verdict_grace=5")
    try:
        _wait_for(server, ENTERED, START_S)
        entered = time.monotonic()
        _wait_for(server, "TP1] " + RETURNED, 120)  # 5 s + 5 s, and a loaded machine's lag
        with pytest.raises(TimeoutError):
            server.wait_ready(timeout_s=HOLD_S)
        log = server.log_text()
        (went_on,) = _lines(log, RETURNED)["TP1"]
        assert "agreed=False (no verdict from TP0 within 10 s" in went_on, went_on
        assert set(_lines(log, RETURNED)) == {"TP1"}  # TP0 never got past its build
        assert set(_lines(log, ENTERED)) == {"TP0"} and not _lines(log, LEFT)
        assert server.processes(), "the hung server should still be there (it hangs, not exits)"
        report("tp 2 old order, TP1 skips the build: TP0 still in the barrier", seconds=time.monotonic() - entered)
    finally:
        assert server.stop(grace_s=5) == []


FAILURE = (
    "the target-only (steps=0) build failed after every TP rank agreed to build (TP0 was still inside its build "
    "(a collective the failed rank never joined); TP1: could not build the target-only (steps=0) runtime state: "
    "RuntimeError('forced by rig tp_faults fail_inside (test only)')); stopping the server"
)
FAST_S = 30  # issue 32 item 5: a failed build ends every rank within this


def _fail_inside(rig, tmp_path, faults: str) -> tuple[RigServer, float]:
    """TP1's build raises before the barrier TP0 waits in; the agreement timeout is the
    patch's own (120 s), so only the build watch can end this fast. Returns the server
    and the seconds from TP0 entering the barrier to the server being gone (or not)."""
    server = _start(rig, tmp_path, faults, agree_timeout_s=None)
    _wait_for(server, ENTERED, START_S)
    entered = time.monotonic()
    deadline = entered + FAST_S
    while time.monotonic() < deadline and server.processes():
        time.sleep(0.5)
    server.count_start("exited" if not server.processes() else "not ready")  # a start, in the run's figures
    return server, time.monotonic() - entered


@heavy("one more server: CI proves the same build watch on a waiting rank at nnodes 2, test_patched_nnodes2.py")
def test_a_build_failing_while_the_other_rank_is_in_its_collective_ends_every_rank_fast(rig, tmp_path):
    server, seconds = _fail_inside(rig, tmp_path, "barrier,fail_inside=1")
    try:
        assert not server.processes(), f"still running {seconds:.0f} s after TP0 entered the barrier:\n{server.log_tail()}"
        log = server.log_text()
        assert set(_lines(log, ENTERED)) == {"TP0"} and not _lines(log, LEFT)  # TP0 never got out of it
        assert set(_lines(log, FAILURE)) == {"TP0", "TP1"}, log[-4000:]  # the same line on every rank
        assert "The server is fired up" not in log
        report("tp 2, TP1's build fails while TP0 is in the build's barrier: server gone", seconds=seconds)
    finally:
        assert server.stop(grace_s=5) == []


@heavy("a negative control of the build watch, ~60 s: a failed build held by a rank in the barrier")
def test_negative_control_without_the_build_watch_the_server_outlives_the_bound(rig, tmp_path):
    server, seconds = _fail_inside(rig, tmp_path, "barrier,fail_inside=1,no_build_watch")
    try:
        assert server.processes(), f"gone in {seconds:.0f} s without the watch:\n{server.log_tail()}"
        assert not _lines(server.log_text(), FAILURE)  # TP1 still waits for TP0's report
        report("tp 2, without the build watch: still there", seconds=seconds)
    finally:
        assert server.stop(grace_s=5) == []
