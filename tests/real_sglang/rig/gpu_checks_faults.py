"""scripts/gpu-check: a rank failing its steps=0 build, before it and inside a CUDA-graph
capture (issue 19 items 1 and 8), each on a server of its own started with
``SPECCONSOLE_RIG_TP_FAULTS`` (rig/tp_faults.py) and a HARD deadline: a server that is
neither ready nor gone by then is a hang, reported as a failure and stopped, never
waited on.

  * ``before``: rank R (the last rank) refuses for a rank-local reason. Every rank off
    with one ``NOT active`` line, no rank builds, the server serves speculating, and its
    outputs are the plain server's, on any tp.
  * ``capture`` (GPU): rank R's build raises inside its second capture. tp 1: the switch
    turns off (``NOT active`` naming the failure) and the server serves, token-exact;
    tp > 1: the patch stops the server (startup.py, "BuildFailed": the other ranks may be
    in one of the build's collectives, so "off and serve" is not offered), not a hang. The
    failing rank names the failure; a rank stuck in the capture's collective is ended by its
    build watch within seconds, naming it too (build_outcome.py): required is the failing
    rank's line, reported are the ranks that logged it. On the CPU (graphs off) the
    fault cannot fire: the CPU run uses ``fail_build`` (raising at the start of the
    build, after the agreement) for the same outcomes, and says so.
"""

from __future__ import annotations

import re
import time

from . import switching as sw
from . import tp_faults
from .gpu_checks import ranks_logging
from .pool import Spec
from .server import PortTaken, RigServer

FAULT_ENV = tp_faults.ENV
NOT_ACTIVE = "Dynamic speculation disable NOT active"
BUILD_FAILED = "the target-only (steps=0) build failed after every TP rank agreed to build"


def _ranks(tp: int) -> set[str]:
    return {f"TP{r}" for r in range(tp)} if tp > 1 else {"-"}


def _wait(server: RigServer, deadline_s: float) -> str:
    """'ready', 'exited' or 'hang' (neither within ``deadline_s``); a start that lost its port
    is none of them (``PortTaken`` goes up: an ended server is what a fault check asks for)."""
    try:
        server.wait_ready(timeout_s=deadline_s)
        return "ready"
    except TimeoutError:
        return "hang"
    except PortTaken:
        raise
    except RuntimeError:
        return "exited"


def _serves(server: RigServer, prompts, want, floor: float) -> float:
    out = sw.generate_ids(server, prompts[:2], len(want[0]))
    assert out == want[:2], "outputs differ from the plain server"
    solo = server.request(
        "/generate", {"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True}}
    )["meta_info"]
    accept = 1 + solo["spec_num_correct_drafts"] / max(1, solo["spec_verify_ct"])
    assert accept >= floor, f"it serves, but accepts {accept:.2f} < {floor} (speculation broken)"
    return accept


def fault_server(
    pool, launcher, spec: Spec, fault: str, prompts, want, *, deadline_s: float, cuda: bool, floor: float = sw.WARM_FLOOR
) -> tuple[str, dict]:
    """Start ``spec`` with the fault ``fault`` ('before' or 'capture'), wait at most
    ``deadline_s``, check the outcome (serving: one request accepts >= ``floor``), stop it."""
    rank = spec.tp - 1
    if fault == "before":
        value = f"refuse={rank}"
    else:
        value = f"fail_capture={rank}" if cuda else f"fail_build={rank}"
    pool.close()  # one server at a time
    log_dir = pool.log_dir / f"fault-{fault}"  # its own log, beside the others
    log_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    server = launcher(pool.rig, spec, log_dir, pool.lifetime_s, env_extra={FAULT_ENV: value})
    try:
        state = _wait(server, deadline_s)
        took = round(time.monotonic() - t0, 1)
        log = server.log_text()
        assert state != "hang", f"HANG: {value}: neither ready nor exited within {deadline_s:.0f} s\n{server.log_tail()[-1500:]}"
        figures = {"fault": value, "outcome": state, "to_outcome_s": took}
        if cuda and fault == "capture":
            assert tp_faults.INJECTED in log, "the capture fault never fired (no CUDA graph captured in the build?)"
        if fault == "capture" and spec.tp > 1:
            assert state == "exited", f"{value} on tp {spec.tp}: the server came up; the patch should have stopped it"
            named = ranks_logging(server, BUILD_FAILED)
            assert f"TP{rank}" in named, f"the failing rank TP{rank} did not name its failure (named on {sorted(named)})"
            figures["named_on"] = sorted(named)
            return f"{value}: the server stopped in {took} s, the failure named on {sorted(named)} (no hang)", figures
        assert state == "ready", f"{value}: the server exited\n{server.log_tail()[-1500:]}"
        assert ranks_logging(server, NOT_ACTIVE) == _ranks(spec.tp), "NOT active is not on every rank"
        assert "Dynamic speculation disable enabled" not in log, "a rank turned the switch on"
        if fault == "capture":
            why = re.escape("could not build the target-only (steps=0) runtime state")
            assert re.search(NOT_ACTIVE + r".*" + why, log), "the NOT active line does not name the build failure"
        accept = _serves(server, prompts, want, floor)
        figures["accept"] = round(accept, 2)
        where = "" if fault == "before" else (" (CPU: fail_build, graphs off)" if not cuda else "")
        return f"{value}{where}: every rank off, ready in {took} s, serves token-exact, accept {accept:.2f}", figures
    finally:
        pool.left += server.stop(grace_s=5)
