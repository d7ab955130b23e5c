"""Helpers of the advisor's tests (tests/advice/): cost curves drawn from the simulator's
model with a known crossover, and waiting for a live simulator's curves to fill."""

from __future__ import annotations

import dataclasses
import random
import time

import httpx

from server_control.protocol import cost_curves as cc
from server_control.protocol.explore import Explorer
from server_control.sim import model


def curves(n, kv=0.0, ctx=500.0, p=0.777, lo=1, hi=20, steps=4000, seed=1, share=0.0):
    """Counters fed by the model: auto mode at threshold n, batches uniform lo..hi."""
    cal = dataclasses.replace(model.DEFAULT, kv_ms_per_ktoken=kv)
    rng = random.Random(seed)
    ex = Explorer(share)
    c = cc.CostCounters()
    t = 0.0
    for i in range(steps):
        b = rng.randint(lo, hi)
        mode = ex.mode("speculative" if b <= n else "target_only", i, b, n)
        c.step(mode, b, t, ctx)
        t += model.step_ms(mode, b, cal, ctx) / 1000 * (1 + rng.gauss(0, 0.03))
        c.commit(mode, b, sum(model.sample_accept(rng, p, 3) for _ in range(b)) if mode == "speculative" else b)
    truth = model.crossover(cal, context=ctx, accept_length=model.expected_accept(p, 3))
    return cc.parse(c.snapshot()), truth


def wait_steps(url, modes=("speculative", "target_only"), steps=200, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (state,) = httpx.get(url + "/server_info", timeout=5).json()["internal_states"]
        rows = state["dynamic_speculation"]["cost_curves"]["modes"]
        if all(sum(r[2] for r in rows.get(m, [])) >= steps for m in modes):
            return
        time.sleep(0.3)
    raise AssertionError(f"fewer than {steps} steps per mode after {timeout} s")


def speculative_curves(steps: int):
    """Parsed cost curves of ``steps`` + 1 speculative steps at batch 3 (cumulative, as a
    server publishes them): one life's counters for the restart tests."""
    from server_control.protocol import cost_curves as cc

    c = cc.CostCounters()
    for i in range(steps + 1):
        c.step("speculative", 3, i * 0.03)
        c.commit("speculative", 3, 9)
    return cc.parse(c.snapshot())
