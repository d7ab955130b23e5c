"""The switch rate comes from the switches' own times (issue 23 item 3): a fresh observer
reading a log full of old switches says what a long-running one says, and a change of
hysteresis / dwell / N starts a new regime with a cool-down before the next suggestion.

Real Session, real log file, real LogPipeline; the URL answers nothing (a free port), so
only the log speaks."""

from __future__ import annotations

import asyncio
import time

from server_control.host.ports import free_port
from server_control.session.session import Session
from server_control.telemetry.flapping import COOL_DOWN_S, switch_rate


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def switch_lines(times: list[float], rank: str = "TP0") -> list[str]:
    lines, mode = [], "target-only"
    for t in times:
        why = "(decode batch 9 > threshold 5)" if mode == "target-only" else "(decode batch 3 <= 4, threshold 5)"
        lines.append(f"[{stamp(t)} {rank}] Dynamic speculation: switched to {mode} {why}")
        mode = "speculative" if mode == "target-only" else "target-only"
    return lines


async def observe(log, seconds: float = 1.5) -> Session:
    session = Session.attach(f"http://127.0.0.1:{free_port()}", log_path=log, poll_interval_s=5.0)
    await session.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (session.store.total and session.log_caught_up()):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    return session


async def test_a_fresh_observer_counts_only_the_recent_switches(tmp_path):
    now = time.time()
    old = [now - 900 + 30 * i for i in range(26)]  # a switch every 30 s, 15..2.5 minutes ago
    recent = [now - 110, now - 80, now - 50, now - 20]  # the same pace in the last two minutes
    log = tmp_path / "server.log"
    log.write_text(
        "\n".join(
            [
                f"[{stamp(now - 901)} TP0] Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10",
                *switch_lines(old + recent),
            ]
        )
        + "\n"
    )
    session = await observe(log)
    try:
        rate = session.snapshot().spec.switch_rate
        assert len(session.timeline.current()) == 30  # every switch was read
        assert rate.count == 4 and rate.per_min == 2.0  # before: all 30 "recent": 30/min FLAPPING
        assert not rate.flapping
    finally:
        await session.close()


async def test_two_observers_started_apart_agree(tmp_path):
    now = time.time()
    log = tmp_path / "server.log"
    log.write_text("\n".join(switch_lines([now - 600 + 10 * i for i in range(60)])) + "\n")  # 6/min for 10 min
    first = await observe(log)
    await asyncio.sleep(1.0)
    second = await observe(log)
    try:
        a, b = first.snapshot().spec.switch_rate, second.snapshot().spec.switch_rate
        assert abs(a.per_min - b.per_min) <= 0.5 and 5.0 <= a.per_min <= 6.5
    finally:
        await first.close()
        await second.close()


async def test_a_hysteresis_change_starts_a_new_regime(tmp_path):
    now = time.time()
    before = [now - 115 + 6 * i for i in range(16)]  # flapping at 10/min until 25 s ago
    lines = switch_lines(before)
    lines.append(f"[{stamp(now - 20)} TP0] Dynamic speculation: hysteresis changed 1 -> 2 (resume_at<=3)")
    lines += switch_lines([now - 12, now - 5])
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    session = await observe(log)
    try:
        rate = session.snapshot().spec.switch_rate
        assert rate.count == 2 and not rate.flapping and rate.suggestion is None  # before: 18 counted, FLAPPING
    finally:
        await session.close()


def test_no_new_suggestion_during_the_cool_down():
    now = 10_000.0
    changed = now - 30
    times = [changed + 4 * i for i in range(8)]  # still flapping after the change: 8 in 30 s
    cooling = switch_rate(times, now, 0.0, threshold=5, hysteresis=2, dwell=10, changed_at=changed)
    assert cooling.flapping and cooling.suggestion is None
    later = switch_rate(
        times + [now + 30 - 3 * i for i in range(10)], now + 31, 0.0, threshold=5, hysteresis=2, dwell=10, changed_at=changed
    )
    assert now + 31 - changed > COOL_DOWN_S and later.flapping and later.suggestion is not None
    assert later.suggestion.value == 4
