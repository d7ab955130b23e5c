"""scripts/gpu-check's server phases beside the main one (test rig only): the plain server
kept SIGSTOPped for the interleaved ITL check (``park``/``unpark``), and the patched
server with ``--speculative-adaptive`` ("adaptive on"; the main patched server is
"adaptive off").
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

from . import gpu_checks as gc
from . import gpu_checks_memory as gm
from . import switching as sw
from .pool import OneAtATime, Spec
from .server import RigServer

# SGLang's adaptive controller, one slot for every batch size: candidate steps 1 and the
# server's (the rig's servers run 2), as tests/real_sglang/test_installed_patch_with_adaptive.py
ADAPTIVE_SLOT = {"candidate_steps": [1, 2], "warmup_batches": 2, "update_interval": 2, "down_hysteresis": 0.0}


def park(pool: OneAtATime) -> RigServer:
    """Take the pool's running server out of it (the pool will not stop it) and SIGSTOP
    its process group: it keeps its memory, costs no CPU, and the next server starts."""
    server = pool.server
    assert server is not None
    pool.server = pool.spec = None
    os.killpg(server.pgid, signal.SIGSTOP)
    return server


def unpark(pool: OneAtATime, server: RigServer) -> None:
    """Stop a parked server (SIGCONT first, so it can take its SIGTERM)."""
    try:
        os.killpg(server.pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    pool.left += server.stop(grace_s=5)


def adaptive_on(
    pool: OneAtATime, spec: Spec, prompts, log_dir: Path, cuda: bool, floor: float = sw.WARM_FLOOR
) -> tuple[str, dict]:
    """``--speculative-adaptive`` with the threshold: the switch active beside the
    controller, switch both ways, and forced target-only's graph / eager counts (the
    controller's steps=0 state reused or padded, never a second full state)."""
    config = log_dir / "adaptive.json"
    config.write_text(json.dumps({"1": {**ADAPTIVE_SLOT, "candidate_steps": sorted({1, spec.steps})}}))
    spec = replace(spec, extra=(*spec.extra, "--speculative-adaptive", "--speculative-adaptive-config", str(config)))
    main_logs, pool.log_dir = pool.log_dir, log_dir / "adaptive"  # its own log
    pool.log_dir.mkdir(parents=True, exist_ok=True)
    try:
        server = pool.get(spec)
    finally:
        pool.log_dir = main_logs
    log = server.log_text()
    assert gc.INIT_LINE in log, "no init line with --speculative-adaptive"
    assert "NOT active" not in log and "speculative_adaptive disabled" not in log, "the switch or adaptive is off"
    built = log.count("Built adaptive runtime state steps=0")
    assert built == 1, f"the steps=0 state was built {built} times (a second full state?)"
    switched, _ = gc.switch_both_ways(server, prompts, tp=1, cuda=cuda, floor=floor)
    buckets, figures = gm.forwards_per_bucket(server, prompts, cuda=cuda)
    pool.close()
    return f"ready in {pool.ready_s[spec.name]:.0f} s; {switched}; {buckets}; steps=0 built {built}x", {
        "steps0_builds": built,
        **figures,
    }
