"""/sim/stats while the scheduler steps: the step-timing summary reads a deque another
thread appends to (it raised 'deque mutated during iteration', HTTP 500, under polling)."""

import threading
import time

from server_control.sim.stats import StepTiming


def test_summary_while_steps_are_added():
    timing = StepTiming()
    stop = threading.Event()

    def stepping():
        while not stop.is_set():
            timing.add(0.01, 0.0101)

    t = threading.Thread(target=stepping, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            timing.summary()  # raised RuntimeError before the fix
    finally:
        stop.set()
        t.join(2)
