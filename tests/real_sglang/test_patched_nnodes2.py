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
from tests.real_sglang.rig.server import RigServer

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


@pytest.fixture(scope="module")
def nodes(rig, tmp_path_factory):
    work = tmp_path_factory.mktemp("nnodes2")
    dist, cores = f"127.0.0.1:{free_port()}", omp_bind(2).split("|")
    t0 = time.monotonic()
    started = []
    try:
        for rank in (0, 1):
            port = free_port()  # node 1 binds a port of its own too (a health endpoint)
            env = server_env(rig)
            env["SGLANG_CPU_OMP_THREADS_BIND"] = cores[rank]
            args = server_args(
                rig, port, tp=2, extra=["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", dist, *DYNAMIC]
            )
            argv = [sys.executable, "-m", "server_control.sglang_patch.serve", *args]
            started.append(RigServer.start(argv, env, work / f"node{rank}.log", port, lifetime_s=SERVER_LIFETIME_S))
        head, other = started
        head.wait_ready(timeout_s=600)
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
