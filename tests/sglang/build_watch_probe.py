"""One rank of a two-rank gloo group on loopback, for test_build_watch.py:
``python -m tests.sglang.build_watch_probe RANK STORE_PORT MODE``.

Rank 0 is inside the build's collective (a gloo ``barrier()`` on the group, as each
CUDA-graph capture does): MODE ``watch`` runs it inside ``build_outcome.BuildWatch`` (its
``end`` prints ENDED and leaves with 7), ``bare`` without one. Rank 1's build failed before
that collective: it reports through ``build_outcome.confirm_built`` and prints the
``BuildFailed`` line and its seconds, then stays 3 s (a server's own teardown) and leaves
with 3. Both ranks use the real world store of ``init_process_group``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from types import SimpleNamespace

import torch.distributed as dist

from server_control.sglang_patch import build_outcome, rank_agreement


def main(rank: int, port: int, mode: str) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    store = dist.TCPStore("127.0.0.1", port, world_size=2, is_master=rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    group = SimpleNamespace(rank_in_group=rank, world_size=2, ranks=[0, 1])
    rank_agreement.tp_group = lambda: group  # type: ignore[assignment]  # SGLang's TP group: the test's
    rank_agreement.default_store = lambda: store  # type: ignore[assignment]
    print("READY", flush=True)
    if rank == 0:

        def end() -> None:
            print("ENDED", flush=True)
            os._exit(7)

        if mode == "watch":
            with build_outcome.BuildWatch(group, store, 1, end=end):
                dist.barrier()
        else:
            dist.barrier()
        print("BARRIER LEFT", flush=True)
        return 0
    t0 = time.monotonic()
    try:
        build_outcome.confirm_built(SimpleNamespace(run=1), "RuntimeError('forced build failure')")
    except build_outcome.BuildFailed as exc:
        print(f"FAILED {time.monotonic() - t0:.1f} {exc}", flush=True)
        time.sleep(3)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
