"""The per-rank live gather never blocks the group: two real processes in a real gloo
group (as SGLang's TP CPU group on a GPU server); a rank whose own readback failed still
takes part and is reported as a "rank failed: ..." row; the /server_info cache gathers on
the same requests on every rank (a request counter), so no rank waits alone."""

from __future__ import annotations

import multiprocessing as mp
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="needs torch (installed with sglang)")
pytestmark = pytest.mark.sglang

from server_control.host.ports import free_port  # noqa: E402

SNAP = {
    "active": True,
    "threshold": 4,
    "hysteresis": 1,
    "min_dwell_steps": 10,
    "force": "auto",
    "mode": "speculative",
    "num_steps": 3,
    "switch_count": 0,
    "last_batch": 2,
}


def _rank(rank: int, port: int, out) -> None:
    import os

    import torch.distributed as dist

    from server_control.protocol.rank_verdict import Verdict
    from server_control.sglang_patch import rank_agreement

    os.environ[rank_agreement.GATHER_EVERY_ENV] = "3"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    rank_agreement.tp_group = lambda: SimpleNamespace(world_size=2, cpu_group=dist.group.WORLD)
    dyn = SimpleNamespace(verdict=Verdict(True, None, True), snapshot=lambda: dict(SNAP))
    failure = RuntimeError("boom") if rank == 1 else None
    first = rank_agreement.gather_live(dyn, failure)  # TP1's own readback failed before this
    broken = SimpleNamespace(verdict=dyn.verdict, snapshot=lambda: 1 / 0)
    second = rank_agreement.gather_live(broken if rank == 0 else dyn)  # TP0's snapshot raises
    cache = rank_agreement.LiveCache()
    gathered = []
    for _ in range(7):  # requests 0..6: gathers at 0, 3, 6 on both ranks
        before = cache.rows
        rows = cache.rows_for(dyn)
        gathered.append(rows is not before)
    out.put((rank, first, second, gathered))
    dist.destroy_process_group()


def test_a_failed_rank_still_takes_part_and_is_named():
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in (0, 1)]
    for p in procs:
        p.start()
    try:
        got = dict((r, rest) for r, *rest in (out.get(timeout=240) for _ in procs))
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.terminate()
    for rank in (0, 1):
        first, second, gathered = got[rank]
        assert first[0]["rank"] == 0 and first[0]["threshold"] == 4
        assert first[1] == dict(first[0], rank=1, failed="rank failed: RuntimeError('boom')")
        assert second[0] == {"rank": 0, "failed": "rank failed: ZeroDivisionError('division by zero')"}
        assert second[1]["mode"] == "speculative"
        assert gathered == [True, False, False, True, False, False, True]
    assert got[0] == got[1]  # every rank reads the same rows
