"""Prefill admission (issue 15): a batched /generate reaches the scheduler as one unit, so
its sequences are admitted in one prefill step (`Prefill batch, #new-seq: 6`), as SGLang's
scheduler does, whatever the thread timing.

The real Generator and Scheduler (its thread not started); the scheduler's condition
variable is replaced by one that plays the worst interleaving: the scheduler thread wins
every race, i.e. at every wake-up it admits whatever is waiting at that moment.
"""

from __future__ import annotations

import asyncio
import threading

from server_control.sim.args import parse_args
from server_control.sim.http_app import AppState
from server_control.sim.scheduler import Scheduler


class SchedulerWinsEveryRace(threading.Condition):
    def __init__(self, sched: Scheduler) -> None:
        super().__init__()
        self.sched = sched
        self.prefills: list[int] = []  # #new-seq of each prefill step

    def notify(self, n: int = 1) -> None:
        new = self.sched._admit()  # what the woken scheduler thread does first
        if new:
            self.prefills.append(len(new))
        super().notify(n)


def scheduler() -> tuple[Scheduler, AppState, SchedulerWinsEveryRace]:
    args, _ = parse_args(
        ["--model-path", "sim/model", "--speculative-algorithm", "EAGLE3", "--speculative-disable-batch-threshold", "2"]
    )
    sched = Scheduler(args, ranks=None, log=None, deliver=lambda waiters: None, on_fatal=lambda code, message: None)
    sched.cond = SchedulerWinsEveryRace(sched)
    return sched, AppState(args, sched, log=None, launch_command=""), sched.cond


async def _submit(state: AppState, body: dict) -> None:
    task = asyncio.create_task(state.generator.generate(body))
    for _ in range(20):  # every sequence's stream starts and waits for tokens
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def test_a_batched_generate_is_admitted_in_one_prefill_step():
    sched, state, cond = scheduler()
    asyncio.run(_submit(state, {"text": ["one batched request"] * 6, "sampling_params": {"max_new_tokens": 40}}))
    assert cond.prefills == [6]
    assert sched.new_request(1, 1).rid == f"{7:08x}"  # six requests were made, no more


def test_single_requests_are_admitted_as_they_come():
    _, state, cond = scheduler()

    async def two():
        await _submit(state, {"text": "first", "sampling_params": {"max_new_tokens": 4}})
        await _submit(state, {"text": "second", "sampling_params": {"max_new_tokens": 4}})

    asyncio.run(two())
    assert cond.prefills == [1, 1]
