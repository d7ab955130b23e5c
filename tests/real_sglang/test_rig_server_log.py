"""A rig server's log is its own: two servers of one name (SGLang's adaptive with its default
config and with a tuned one were both ``crossover-adaptive``) appended to one file, and the
second was "ready" at once on the first's ready line. ``mode_cost`` then paused it while it
still started, and its first measured window failed to connect (four runs of four, 31-256
``ConnectError``s, docs/cpu-rig.md). No SGLang here: a process that prints the ready line
late stands in for the server."""

from __future__ import annotations

import sys
import time

from tests.real_sglang.rig.pool import Spec
from tests.real_sglang.rig.server import READY_LINE, RigServer
from tests.support import run_figures


def _late_ready(delay_s: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({delay_s}); print({READY_LINE!r}, flush=True); time.sleep(30)"]


def test_a_server_is_not_ready_on_an_earlier_servers_ready_line_in_the_same_log(tmp_path, monkeypatch):
    starts: list[str] = []  # the stand-in is not one of the run's real SGLang starts
    monkeypatch.setattr(run_figures, "record", starts.append)
    log = tmp_path / "crossover-adaptive.log"
    log.write_text(f"an earlier server's start\n{READY_LINE}\n\r\n")
    server = RigServer.start(_late_ready(1.5), {"PATH": "/usr/bin:/bin"}, log, port=1, lifetime_s=60)
    try:
        t0 = time.monotonic()
        server.wait_ready(timeout_s=30)
        assert time.monotonic() - t0 >= 1.0, "ready on the earlier server's line"
        assert server.log_text() == READY_LINE + "\n", server.log_text()
        assert READY_LINE in log.read_text() and log.read_text().count(READY_LINE) == 2  # the file keeps both
        assert len(starts) == 1 and ", ready, " in starts[0], starts
    finally:
        server.stop(grace_s=5)


def test_adaptive_servers_with_different_configs_have_different_names():
    default = Spec("crossover", patched=False, steps=3, adaptive="default")
    tuned = Spec("crossover", patched=False, steps=3, adaptive="/x/benchmarks/data/adaptive_crossover_tuned.json")
    assert default.name == "crossover-adaptive"
    assert tuned.name == "crossover-adaptive-adaptive_crossover_tuned"
    assert Spec("crossover").name == "crossover-patched" and Spec("crossover", patched=False).name == "crossover-plain"
    both = Spec("crossover", steps=3, adaptive="/x/benchmarks/data/adaptive_crossover_steps.json")  # the threshold beside it
    assert both.name == "crossover-patched-adaptive-adaptive_crossover_steps"
    assert Spec("crossover", adaptive="default").name == "crossover-patched-adaptive"
