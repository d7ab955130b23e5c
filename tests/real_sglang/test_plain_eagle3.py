"""The rig itself: plain (unpatched) SGLang 0.5.23 serves EAGLE-3 on this CPU.

Proves the stand-in libcuda, the pure-torch operators, the platform override and the tiny
constant models together: greedy EAGLE-3 with 2 steps accepts every draft (3.00).

The server test is the heavy tier's (a rig diagnostic with a server of its own, nothing of
the patch loaded): in CI the same checks run on the fail-mode server, SGLang's EAGLE-3 with
the patch gated off (test_patched_failmode.py::test_concurrency_1_accepts_every_draft), and
every patched server runs on the same rig.
"""

from __future__ import annotations

import ctypes
import time

import pytest

from server_control.host.ports import free_port
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.build import server_args, server_env
from tests.real_sglang.rig.constant_pair import assert_every_draft_accepted
from tests.real_sglang.rig.server import RigServer, plain_launch_argv, rss_mb
from tests.support.heavy import heavy

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]


def test_stand_in_libcuda_reports_no_device(rig):
    lib = ctypes.CDLL(str(rig.lib_dir / "libcuda.so.1"))
    count = ctypes.c_int(7)
    assert lib.cuInit(0) == 100
    assert lib.cuDeviceGetCount(ctypes.byref(count)) == 100 and count.value == 0


@pytest.fixture(scope="module")
def plain_server(rig, rig_python, tmp_path_factory):
    port = free_port()
    argv = plain_launch_argv(server_args(rig, port, extra=["--decode-log-interval", "4"]), rig_python)
    server = RigServer.start(
        argv, server_env(rig), tmp_path_factory.mktemp("plain") / "plain-eagle3.log", port, lifetime_s=SERVER_LIFETIME_S
    )
    try:
        ready = server.wait_ready()
        pids = server.processes()
        rss = rss_mb(pids)
        report(
            "plain EAGLE-3 server",
            ready_s=ready,
            processes=len(pids),
            rss_total_mb=sum(rss.values()),
            rss_max_mb=max(rss.values()),
        )
        yield server
    finally:
        left = server.stop()
        assert left == [], f"processes left after stop: {left}"


@heavy("a rig diagnostic with a server of its own: CI runs its checks on the fail-mode server")
def test_concurrency_1_accepts_every_draft(plain_server, rig):
    t0 = time.monotonic()
    assert_every_draft_accepted(plain_server, rig.constant_token_id)
    report("plain c=1 request (31 tokens), checked", seconds=time.monotonic() - t0)
