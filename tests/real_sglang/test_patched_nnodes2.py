"""Two nodes on loopback: two patched ``serve`` processes, ``--nnodes 2 --node-rank 0/1``,
``--dist-init-addr 127.0.0.1:<port>``, tp 2 (one rank per node, gloo on the CPU).

Node 0 serves HTTP and holds TP0; node 1 holds TP1 and writes its own log. Both ranks
must log the init line, switch together (each in its own log) and take a runtime
threshold sent to node 0. Constant models: accept length 3.00 speculative, 1.00 not.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

from server_control.host.ports import free_port
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.build import omp_bind, server_args, server_env
from tests.real_sglang.rig.pool import PORT_ATTEMPTS
from tests.real_sglang.rig.server import PortTaken, RigServer

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
TOKENS = 31
DYNAMIC = [
    "--speculative-disable-batch-threshold",
    "2",
    "--speculative-disable-hysteresis",
    "1",
    "--speculative-disable-min-dwell-steps",
    "2",
    "--decode-log-interval",
    "4",
]


def _has(server: RigServer, rank: str, needle: str, since: int = 0) -> bool:
    """``rank`` (e.g. 'TP1') logged a line containing ``needle`` after offset ``since``."""
    pattern = re.compile(rf"^\[[^\]]* {rank}\] .*{re.escape(needle)}", re.M)
    return bool(pattern.search(server.log_text()[since:]))


def _accept(meta: dict) -> float:
    return 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"]


def _start_nodes(rig, work, env_extra: dict | None = None) -> list[RigServer]:
    """Node 0 and node 1 (tp 2, one rank each), started (not waited for)."""
    dist, cores = f"127.0.0.1:{free_port()}", omp_bind(2).split("|")
    started = []
    for rank in (0, 1):
        port = free_port()  # node 1 binds a port of its own too (a health endpoint)
        env = server_env(rig)
        env["SGLANG_CPU_OMP_THREADS_BIND"] = cores[rank]
        env.update(env_extra or {})
        args = server_args(rig, port, tp=2, extra=["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", dist, *DYNAMIC])
        argv = [sys.executable, "-m", "server_control.sglang_patch.serve", *args]
        started.append(RigServer.start(argv, env, work / f"node{rank}.log", port, lifetime_s=SERVER_LIFETIME_S))
    return started


FAILURE = (
    "the target-only (steps=0) build failed after every TP rank agreed to build (TP0 was still inside its build "
    "(a collective the failed rank never joined); TP1: could not build the target-only (steps=0) runtime state: "
    "RuntimeError('forced by rig tp_faults fail_inside (test only)')); stopping the server"
)
ENTERED = "rig tp_faults: build barrier entered"
FAST_S = 30  # issue 32 item 5


def test_a_build_failing_on_node_1_while_node_0_is_in_its_collective_ends_both_nodes_fast(rig, tmp_path):
    """TP1 (node 1) fails its steps=0 build before the barrier TP0 (node 0) waits in
    (rig/tp_faults.py ``fail_inside``), the patch's own 120-s agreement timeout: both nodes'
    servers are gone within 30 s of TP0 entering the barrier, each node's log naming the
    failure (TP0's build watch ends node 0: build_outcome.py; its negative control without a
    server: tests/sglang/test_build_watch.py, with one at tp 2: test_patched_tp2_build_order.py,
    heavy). Before the watch, node 0 stayed in the barrier: gloo's timeout is SGLang's."""
    started = _start_nodes(rig, tmp_path, {"SPECCONSOLE_RIG_TP_FAULTS": "barrier,fail_inside=1"})
    head, other = started
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not _has(head, "TP0", ENTERED):
            assert head.processes(), f"node 0 ended before its build:\n{head.log_tail()}"
            time.sleep(0.5)
        entered = time.monotonic()
        while time.monotonic() < entered + FAST_S and (head.processes() or other.processes()):
            time.sleep(0.5)
        seconds = time.monotonic() - entered
        gone = (not head.processes(), not other.processes())
        head.count_start("exited" if all(gone) else "not ready")  # the pair is one start in the run's figures
        assert gone == (True, True), f"{seconds:.0f} s after TP0 entered the barrier\n{head.log_tail()}\n{other.log_tail()}"
        assert _has(head, "TP0", FAILURE) and _has(other, "TP1", FAILURE), head.log_tail() + other.log_tail()
        assert "The server is fired up" not in head.log_text()
        report("nnodes 2, TP1's build fails while TP0 is in the build's barrier: both nodes gone", seconds=seconds)
    finally:
        left = [pid for server in started for pid in server.stop()]
        assert left == [], f"processes left: {left}"


@pytest.fixture(scope="module")
def nodes(rig, tmp_path_factory):
    work = tmp_path_factory.mktemp("nnodes2")
    t0 = time.monotonic()
    started: list[RigServer] = []
    try:
        for attempt in range(1, PORT_ATTEMPTS + 1):  # new ports each time: a port taken before it was bound
            started = _start_nodes(rig, work)
            head, other = started
            try:
                head.wait_ready(timeout_s=600, also=(other,))
                break
            except PortTaken:
                left = [pid for server in started for pid in server.stop()]
                assert left == [], f"processes left: {left}"
                started = []
                if attempt == PORT_ATTEMPTS:
                    raise
        assert other.processes(), f"node 1 is gone:\n{other.log_tail()}"
        report("nnodes 2 (tp 2, gloo, loopback): node 0 ready", seconds=time.monotonic() - t0)
        yield head, other
    finally:
        left = [pid for server in started for pid in server.stop()]
        assert left == [], f"processes left: {left}"


def test_each_node_logs_the_init_line_for_its_rank(nodes):
    head, other = nodes
    line = "Dynamic speculation disable enabled: threshold=2"
    assert _has(head, "TP0", line) and _has(other, "TP1", line)
    assert not _has(head, "TP1", line) and not _has(other, "TP0", line)


def test_both_nodes_switch_together_and_back(nodes):
    head, other = nodes
    assert _accept(head.generate("the quick brown fox", TOKENS)["meta_info"]) == pytest.approx(3.0)
    marks = [len(head.log_text()), len(other.log_text())]
    outs = head.generate_batch(6, TOKENS)
    assert all(o["meta_info"]["spec_num_correct_drafts"] == 0 for o in outs)
    needle = "switched to target-only (decode batch 6 > threshold 2)"
    assert _has(head, "TP0", needle, marks[0]) and _has(other, "TP1", needle, marks[1])
    marks = [len(head.log_text()), len(other.log_text())]
    assert _accept(head.generate("the lazy dog", TOKENS)["meta_info"]) == pytest.approx(3.0)
    needle = "switched to speculative (decode batch 1 <= 1, threshold 2)"
    assert _has(head, "TP0", needle, marks[0]) and _has(other, "TP1", needle, marks[1])


def test_runtime_threshold_sent_to_node_0_reaches_node_1(nodes):
    head, other = nodes
    assert head.request("/set_internal_state", {"server_args": {"speculative_disable_batch_threshold": 8}}) == [True]
    needle = "Dynamic speculation: threshold changed 2 -> 8"
    assert _has(head, "TP0", needle) and _has(other, "TP1", needle)
    marks = [len(head.log_text()), len(other.log_text())]
    outs = head.generate_batch(6, TOKENS)
    assert all(_accept(o["meta_info"]) == pytest.approx(3.0) for o in outs)
    assert "switched to" not in head.log_text()[marks[0] :] + other.log_text()[marks[1] :]
