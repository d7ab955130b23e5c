"""scripts/gpu-check's stress of the target-only path (issue 19 item 8): forced
target-only at the largest decode batch the server admits (the effective
``max_running_requests``, 48 for an EAGLE server unless set) with long prompts arriving
with it, so chunked prefill runs beside a full decode batch: the moment the steps=0
state's memory (taken out of the KV budget at start-up) matters most.

Passes when every request completes with all its tokens, the server still serves a
request after it, no rank logged an out-of-memory error or a traceback, every rank ran
target-only steps (graph replays and, above ``cuda_graph_max_bs``, eager ones on CUDA)
and the steps=0 memory per rank is still within the reserve (``memory_per_rank``). On the
CPU (graphs off, ``--max-total-tokens 4096``) the same path runs at a batch of 8 with
256-token prompts: the mechanism, not the memory. With the rig's tiny models (2,048
positions) the prompts are at most 1,536 tokens: production context lengths need a real
pair: with ``--model``/``--draft-model`` the long prompts are the pair's own tokens, its
context less the output, at most gpu_pair.STRESS_CAP (8,192) tokens.
"""

from __future__ import annotations

from server_control.protocol import decision

from . import gpu_checks_memory as gm
from . import switching as sw
from .gpu_pair import Workload
from .server import RigServer

LONG_EVERY = 4  # one request in four has a long prompt
MAX_NEW = 24
FAILURES = ("out of memory", "OutOfMemoryError", "Traceback (most recent call last)")


def _target_only_steps(server: RigServer) -> list[int]:
    rows = [dict((r.get("forwards") or {}).get(decision.TARGET_ONLY) or {}) for r in gm.rows(server)]
    return [r.get("target_graph", 0) + r.get("target_eager", 0) for r in rows]


def stress_target_only(server: RigServer, work: Workload, *, cuda: bool) -> tuple[str, dict]:
    (state, *_) = server.request("/server_info")["internal_states"]
    limits = state[decision.STATE_KEY].get("limits") or {}
    running = limits.get("max_running_requests")
    assert isinstance(running, int) and running > 0, f"no effective max_running_requests published ({limits})"
    batch = running if cuda else min(running, 8)
    long_len = work.stress_length(cuda, MAX_NEW)
    prompts = [work.long_prompt(i, long_len if i % LONG_EVERY == 0 else 64) for i in range(batch)]
    log = sw.LogWindow(server)
    before = _target_only_steps(server)
    sw.force(server, decision.TARGET_ONLY)
    try:
        outs = sw.generate_ids(server, prompts, MAX_NEW, timeout=600)
    finally:
        sw.force(server, decision.AUTO)
    short = [i for i, o in enumerate(outs) if len(o) != MAX_NEW]
    assert not short, f"requests {short} did not get their {MAX_NEW} tokens"
    after = _target_only_steps(server)
    grew = [a - b for a, b in zip(after, before)]
    assert grew and all(g > 0 for g in grew), f"target-only steps per rank: {grew}"
    found = [f for f in FAILURES if f in log.text()]
    assert not found, f"the server logged {found} during the stress"
    assert len(sw.generate_ids(server, prompts[1:2], 4)[0]) == 4, "the server does not serve after the stress"
    memory, figures = gm.memory_per_rank(server, cuda=cuda)
    tokens = sum(len(p) for p in prompts)
    return (
        f"{batch} requests ({tokens} prompt tokens, every {LONG_EVERY}th {long_len}) forced target-only: "
        f"all completed, target-only steps per rank {grew}; {memory}"
    ), {"batch": batch, "prompt_tokens": tokens, "target_only_steps": grew, **figures}
