"""scripts/gpu-check's checks of the steps=0 state's memory and of graph / eager decode
steps per mode (issue 19 item 8), each against a running patched server, from what the
patch publishes in ``/server_info`` (``dynamic_speculation``: ``state_memory`` and
``forwards``, every TP rank in ``ranks``).

  * ``memory_per_rank``: every rank measured its build; on CUDA the build took no more
    than the reserve taken out of the KV budget (``reserved_gib``).
  * ``forwards_per_bucket``: forced target-only, a batch of ``max_bs`` and one of
    ``max_bs + 1`` requests: on CUDA the first replays target and draft-extend graphs and
    the second runs both eager, on every rank; on the CPU (graphs off) every step counts
    eager and none graph. The buckets between are covered by SGLang's padding (any batch
    up to ``max_bs`` pads to a captured bucket): GPU-only, like the replays themselves.
"""

from __future__ import annotations

from typing import Any

from server_control.protocol import decision

from . import switching as sw
from .server import RigServer


def rows(server: RigServer) -> list[dict[str, Any]]:
    """Every rank's published row (TP 1: the snapshot itself)."""
    (state, *_) = server.request("/server_info")["internal_states"]
    dyn = state[decision.STATE_KEY]
    return [r for r in dyn.get("ranks") or [dyn] if isinstance(r, dict)]


def memory_per_rank(server: RigServer, *, cuda: bool) -> tuple[str, dict]:
    found = rows(server)
    assert found, "no rank row in /server_info"
    used = []
    for i, row in enumerate(found):
        mem = row.get("state_memory")
        assert isinstance(mem, dict), f"rank {i}: no state_memory ({row})"
        assert isinstance(mem.get("used_gib"), (int, float)), f"rank {i}: used_gib not measured ({mem})"
        assert "reserved_gib" in mem, f"rank {i}: no reserved_gib ({mem})"
        if cuda:
            reserved = mem["reserved_gib"]
            assert reserved is not None, f"rank {i}: nothing was taken out of the KV budget"
            assert mem["used_gib"] <= reserved, (
                f"rank {i}: the steps=0 state took {mem['used_gib']} GiB, more than the {reserved} GiB reserved"
            )
        used.append(mem["used_gib"])
    return (f"{len(found)} rank(s), used {used} GiB, reserved {found[0]['state_memory']['reserved_gib']}", {"used_gib": used})


def _counts(server: RigServer) -> list[dict[str, int]]:
    return [dict((row.get("forwards") or {}).get(decision.TARGET_ONLY) or {}) for row in rows(server)]


def _grew(before: list[dict[str, int]], after: list[dict[str, int]], part: str) -> list[int]:
    return [a.get(part, 0) - b.get(part, 0) for b, a in zip(before, after)]


def forwards_per_bucket(server: RigServer, prompts: list[list[int]], *, cuda: bool) -> tuple[str, dict]:
    (state, *_) = server.request("/server_info")["internal_states"]
    limits = state[decision.STATE_KEY].get("limits") or {}
    max_bs = limits.get("cuda_graph_max_bs") if cuda else None
    sizes = [max_bs, max_bs + 1] if isinstance(max_bs, int) else [len(prompts)]
    sw.force(server, decision.TARGET_ONLY)
    try:
        figures = {}
        for bs in sizes:
            before = _counts(server)
            batch = [prompts[i % len(prompts)] for i in range(bs)]
            sw.generate_ids(server, batch, 8)
            after = _counts(server)
            graph = [*_grew(before, after, "target_graph"), *_grew(before, after, "draft_extend_graph")]
            eager = [*_grew(before, after, "target_eager"), *_grew(before, after, "draft_extend_eager")]
            figures[f"bs{bs}"] = {"graph": graph, "eager": eager}
            if not cuda:
                assert all(g == 0 for g in graph) and all(e > 0 for e in eager), (bs, figures)
            elif bs == max_bs:
                assert all(g > 0 for g in graph), f"batch {bs} <= max_bs: no graph replay {figures}"
            else:
                assert all(e > 0 for e in eager), f"batch {bs} > max_bs: no eager step {figures}"
    finally:
        sw.force(server, decision.AUTO)
    where = (
        f"graphs at {max_bs}, eager at {max_bs + 1}" if isinstance(max_bs, int) else "graphs off: every target-only step eager"
    )
    return f"{where} on {len(after)} rank(s)", figures
