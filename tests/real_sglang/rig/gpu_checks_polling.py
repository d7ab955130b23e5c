"""scripts/gpu-check: N's warnings in the server's log (issue 19 item 3) and decode
inter-token latency under the console's polling, plain against patched (item 4).

  * ``n_warnings``: threshold set at runtime to the server's effective
    ``max_running_requests`` (SGLang's 48 for an EAGLE server unless set) logs "can never
    trigger" on every rank; set to ``cuda_graph_max_bs`` (GPU: graphs on) it logs "runs
    without CUDA graphs"; the start-up threshold (2) logged neither. Back to 2 after.
  * ``itl_under_polling``: benchmarks/poll_itl.py's arms (nobody polls; the console's rate;
    ``/server_info`` at 20 Hz) on the plain server and on the patched one, interleaved:
    per round each server in turn (the other SIGSTOPped), its arms in a rotated order.
    Figures: ITL p50 / p99 per server and arm, each arm over ``none``, and patched's ratio
    over plain's. It fails when a measurement is void (no tokens, no polls, a rate not
    reached: ``FLOORS_CUDA`` / ``FLOORS_CPU``) and, on CUDA, when the console's polling costs the patched server more than
    ``max_ratio`` times what it costs the plain one (p50 over none; a provisional bound
    until a GPU run has measured it). On the CPU rig the ratio is reported, not judged:
    the noise of a loaded 2-core machine is as large as the effect (docs/sglang-patch.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

from server_control.protocol import decision

from . import switching as sw
from .gpu_checks import ranks_logging
from .gpu_checks_memory import rows
from .server import RigServer

# polls a second an arm must reach, or its measurement is void. The console polls two paths
# once a second each; "20 Hz" polls /server_info as fast as it answers, up to 20 a second.
# On a loaded 2-core CPU one answer takes ~0.5 s (1.9 a second was measured at load 11-15).
FLOORS_CUDA = {"console": 1.5, "20hz": 10.0}
FLOORS_CPU = {"console": 0.3, "20hz": 0.5}


def _limits(server: RigServer) -> dict:
    (state, *_) = server.request("/server_info")["internal_states"]
    return dict(state[decision.STATE_KEY].get("limits") or {})


def n_warnings(server: RigServer, *, tp: int) -> tuple[str, dict]:
    want = {f"TP{r}" for r in range(tp)} if tp > 1 else {"-"}
    assert not ranks_logging(server, decision.NEVER_TRIGGERS), "a warning at threshold 2"
    limits = _limits(server)
    running, max_bs = limits.get("max_running_requests"), limits.get("cuda_graph_max_bs")
    assert isinstance(running, int), f"no effective max_running_requests published ({limits})"
    said = []
    try:
        mark = len(server.log_text())
        sw.set_threshold(server, running)
        assert ranks_logging(server, f"threshold {running} {decision.NEVER_TRIGGERS}", mark) == want, (
            f"no 'can never trigger' warning at threshold {running} on every rank {want}"
        )
        said.append(f"{running}: never triggers")
        if isinstance(max_bs, int):
            mark = len(server.log_text())
            sw.set_threshold(server, max_bs)
            assert ranks_logging(server, f"threshold {max_bs} >= cuda_graph_max_bs {max_bs}", mark) == want, (
                f"no '{decision.EAGER_ABOVE}' warning at threshold {max_bs} on every rank"
            )
            said.append(f"{max_bs}: eager above cuda_graph_max_bs")
    finally:
        sw.set_threshold(server, 2)
    graphs = "" if isinstance(max_bs, int) else " (graphs off: no cuda_graph_max_bs to warn about; GPU-only)"
    return "warned at threshold " + "; ".join(said) + graphs, {"max_running_requests": running, "cuda_graph_max_bs": max_bs}


def _signal(server: RigServer, sig: int) -> None:
    try:
        os.killpg(server.pgid, sig)
    except ProcessLookupError:
        pass


def _over(table: dict[str, dict], arm: str) -> float:
    """patched's p50 over its ``none`` arm, divided by plain's; NaN when a p50 is 0."""
    mine, theirs = table[f"patched/{arm}"], table[f"plain/{arm}"]
    if not (mine["base_s"] and theirs["base_s"] and theirs["p50_s"]):
        return float("nan")
    return (mine["p50_s"] / mine["base_s"]) / (theirs["p50_s"] / theirs["base_s"])


def itl_under_polling(
    plain: RigServer, patched: RigServer, *, requests: int, max_tokens: int, rounds: int, cuda: bool, max_ratio: float
) -> tuple[str, dict]:
    from benchmarks import poll_itl

    opts = argparse.Namespace(requests=requests, max_tokens=max_tokens)
    arms = list(poll_itl.ARMS)
    got: dict[str, dict[str, dict]] = {}
    servers = {"plain": plain, "patched": patched}
    seconds: dict[str, float] = {}
    try:
        for r in range(rounds):
            for name in ("plain", "patched") if r % 2 == 0 else ("patched", "plain"):
                for other, s in servers.items():
                    _signal(s, signal.SIGCONT if other == name else signal.SIGSTOP)
                for arm in arms[r % len(arms) :] + arms[: r % len(arms)]:
                    t0 = time.monotonic()
                    one = poll_itl.measure(servers[name].url, arm, opts)
                    seconds[f"{name}/{arm}"] = seconds.get(f"{name}/{arm}", 0.0) + time.monotonic() - t0
                    slot = got.setdefault(name, {}).setdefault(arm, {"gaps": [], "polls": 0})
                    slot["gaps"] += one["gaps"]
                    slot["polls"] += one["polls"]
    finally:
        _signal(plain, signal.SIGSTOP)
        _signal(patched, signal.SIGCONT)
    table: dict[str, dict] = {}
    for name, by_arm in got.items():
        base = poll_itl.pct(by_arm["none"]["gaps"], 50)
        for arm, slot in by_arm.items():
            assert slot["gaps"], f"{name}/{arm}: no tokens measured"
            p50, p99 = poll_itl.pct(slot["gaps"], 50), poll_itl.pct(slot["gaps"], 99)
            assert p50 is not None and p99 is not None and base, f"{name}/{arm}: no percentile"
            rate = slot["polls"] / max(1e-9, seconds[f"{name}/{arm}"])
            floor = (FLOORS_CUDA if cuda else FLOORS_CPU).get(arm, 0.0)
            assert rate >= floor, f"{name}/{arm}: {rate:.1f} polls/s, below {floor} (the polling did not happen)"
            table[f"{name}/{arm}"] = {
                "p50_s": p50,
                "base_s": base,
                "p50_ms": round(p50 * 1e3, 2),
                "p99_ms": round(p99 * 1e3, 2),
                "vs_none": round(p50 / base, 3),
                "polls_s": round(rate, 1),
            }
    # from the unrounded p50s; a p50 gap of 0 (tokens that arrived in one read: a loaded
    # machine, or a speculative step's several tokens) makes the ratio undefined, not a crash
    console = _over(table, "console")
    fast = _over(table, "20hz")
    if cuda:
        assert console <= max_ratio, (
            f"the console's polling costs the patched server {console:.2f}x what it costs the plain one (> {max_ratio})"
        )
    detail = (
        f"p50 ms none/console/20hz: plain {[table[f'plain/{a}']['p50_ms'] for a in arms]}, "
        f"patched {[table[f'patched/{a}']['p50_ms'] for a in arms]}; patched over plain (each over none): "
        f"console {console:.2f}x, 20 Hz {fast:.2f}x" + ("" if cuda else " (CPU: reported, not judged)")
    )
    ranks = len(rows(patched))
    return detail, {"table": table, "patched_over_plain_console": round(console, 3), "ranks": ranks}
