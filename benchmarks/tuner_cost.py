"""What the in-server tuner (``--speculative-disable-auto-tune``) costs the scheduler loop.

    python -m benchmarks.tuner_cost [--rounds 30] [--calls 20000]

On the real SGLang 0.5.23 ``SchedulerRequestReceiver.recv_requests`` as the patch wraps it
(sglang_patch/targets/request_receiver.py, installed through the import hook), on two real
zmq PULL sockets with nothing queued (one scheduler-loop iteration's receive on TP0 of a
TP-1 group: no broadcast), with a started patched rank (tests/sglang/autotune_objects.py)
whose cost counters were fed by the simulator's step-time model. Arms, interleaved round
by round (``--calls`` calls each), median over rounds of ns per call:

  sglang          SGLang's own method (the wrapper's ``__wrapped__``): the baseline
  flag off        the wrapper, no tuner configured (``_active`` None)
  flag on         the wrapper with the tuner on, between readings (``offer`` finds the
                  last reading younger than ``POLL_S``; ``take`` of an empty list)
  bare, bare off, bare on   the same three on a class whose method does nothing, wrapped
                  by the patch's own ``patch``: the wrapper's cost without the ~12 us of
                  zmq polls (and their noise) around it

and once a second / once an interval, per call (median of ``--rounds`` calls each):

  reading         what ``offer`` adds once a ``POLL_S``: ``cost_curves.parse`` of the
                  counters' snapshot + ``Tuner.observe`` that only stores it
  decision        ``Tuner.observe`` when it decides (every ``interval_s``): the crossover
                  estimate with its bootstrap interval over the window's curves

Printed: each figure, the wrapper's cost over SGLang's own (flag off, flag on), and the
reading and decision amortised over the loop iterations of a second at 100 iterations/s
(a 10 ms decode step) and at 1000/s. A decision is paid in one iteration on TP0, which
every rank waits for in the broadcast.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from server_control.sglang_patch import hook

hook.install()  # before SGLang is imported, as the bootstrap does

GOAL_NS = 1000.0


def _setup():
    from sglang.srt.runtime_context import get_parallel

    from server_control.sglang_patch import autotune
    from tests.sglang.autotune_objects import Clock, Receiver, feed, publish, rank_worker

    override, server_args = publish(16, "1-16")
    ranks = get_parallel().override(tp_rank=0, pp_rank=0, attn_tp_rank=0, attn_cp_rank=0)
    ranks.__enter__()
    dyn = rank_worker(server_args)._dynspec
    clock = dyn.autotune.clock = Clock()
    receiver = Receiver(server_args)
    t, raws = 0.0, []
    for second in range(32):  # 32 s of traffic, a snapshot each second: the window (30 s) full
        t = feed(dyn.curves, steps=300, seed=second, t0=t)
        raws.append(dyn.curves.snapshot())
    return autotune, dyn, clock, receiver, raws, (override, ranks)


def _bare_class():
    """A class whose ``recv_requests`` does nothing, wrapped by the patch's own ``patch``:
    the wrapper's cost without SGLang's zmq polls around it."""
    from types import SimpleNamespace

    from server_control.sglang_patch.targets import request_receiver

    class Bare:
        def recv_requests(self, local_reqs=None):
            return local_reqs

    request_receiver.patch(SimpleNamespace(SchedulerRequestReceiver=Bare))
    return Bare


def _time(fn, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    autotune, dyn, clock, receiver, raws, _keep = _setup()
    from server_control.protocol import cost_curves
    from server_control.protocol.crossover import estimate
    from server_control.protocol.tuner import Tuner

    real = receiver.real
    wrapped = type(real).recv_requests
    orig = wrapped.__wrapped__
    at = dyn.autotune
    assert autotune.active() is at
    at.offer()  # the first reading (t=0): no decision yet
    clock.t = 0.5  # within POLL_S of that reading: every later offer returns at once

    def sglang() -> None:
        orig(real, [])

    def flag_off() -> None:
        wrapped(real, [])

    def flag_on() -> None:
        wrapped(real, [])

    bare_cls = _bare_class()
    bare, bare_orig = bare_cls(), bare_cls.recv_requests.__wrapped__
    fns = {
        "sglang": sglang,
        "flag off": flag_off,
        "flag on": flag_on,
        "bare": lambda: bare_orig(bare, []),
        "bare off": lambda: bare.recv_requests([]),
        "bare on": lambda: bare.recv_requests([]),
    }
    arms: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(args.rounds):
        order = list(arms)[r % len(arms) :] + list(arms)[: r % len(arms)]  # rotated: none always first
        for name in order:
            autotune._active[0] = at if name.endswith("on") else None
            arms[name].append(_time(fns[name], args.calls))
    autotune._active[0] = at
    assert dyn.switch.threshold == 16 and at.pending is None  # nothing moved between readings

    # the reading and the decision on the counters as they grew second by second, a fresh
    # tuner per round holding the window's readings (one a second, as offer takes them)
    parsed = [cost_curves.parse(raw) for raw in raws]
    reading, decision, decided = [], [], []
    for _ in range(args.rounds):
        tuner = Tuner(at.tuner.settings)
        for sec in range(30):
            tuner.observe(float(sec), parsed[sec], 16)
        tuner._last_decision = 30.0
        t0 = time.perf_counter_ns()
        tuner.observe(30.5, cost_curves.parse(raws[30]), 16)  # a reading: stored, no decision
        t1 = time.perf_counter_ns()
        tuner._last_decision = 31.0 - tuner.settings.interval_s
        t2 = time.perf_counter_ns()
        tuner.observe(31.0, parsed[31], 16)  # decides
        t3 = time.perf_counter_ns()
        reading.append(t1 - t0)
        decision.append(t3 - t2)
        decided.append(tuner._last_decision == 31.0)
    assert all(decided), "a decision arm did not decide"
    e = estimate(parsed[31].minus(tuner._history[0][1]))
    print(f"the decision's estimate: suggested N {e.suggested}, interval {e.interval}, {len(e.points)} points")

    med = {k: statistics.median(v) for k, v in arms.items()}
    load = os.getloadavg()
    print(f"load averages {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} rounds x {args.calls} calls")
    for k, v in med.items():
        print(f"  {k:10s} {v:9.0f} ns per recv_requests (median; min {min(arms[k]):.0f})")
    off, on = med["flag off"] - med["sglang"], med["flag on"] - med["sglang"]
    print(f"  wrapper over SGLang's own: flag off {off:+.0f} ns, flag on {on:+.0f} ns (goal <= {GOAL_NS:.0f} ns per step)")
    off, on = med["bare off"] - med["bare"], med["bare on"] - med["bare"]
    print(f"  wrapper over a bare method (its own cost, no zmq noise): flag off {off:+.0f} ns, flag on {on:+.0f} ns")
    rd, dc = statistics.median(reading), statistics.median(decision)
    interval = at.tuner.settings.interval_s
    print(f"  reading  {rd / 1000:9.1f} us once a second (parse + observe storing it; median, max {max(reading) / 1000:.1f})")
    print(f"  decision {dc / 1000:9.1f} us once every {interval:g} s (observe deciding; median, max {max(decision) / 1000:.1f})")
    for rate in (100, 1000):
        per = (rd + dc / interval) / rate
        print(f"  amortised at {rate} iterations/s: {per:.0f} ns per iteration (+ flag on {on:.0f} = {per + on:.0f})")


if __name__ == "__main__":
    main()
