"""A clean stop is not an error (issue 23 item 4): SIGTERM to the simulator's group (what
`specconsole stop` sends) took the TP ranks down first and the simulator logged "Scheduler
failed: TP0 exited unexpectedly", so the errors-only filter showed every clean stop as an
error. Real processes (TP 2, spawned ranks), three stops for the race between the ranks'
death and the main process's own SIGTERM."""

from __future__ import annotations

from server_control.logs import parse_text


def test_a_sigterm_to_the_group_logs_no_failure(sim_factory):
    for _ in range(3):
        sim = sim_factory(tp=2, threshold=5, traffic="steady:6")
        sim.wait_ready()
        sim.stop()
        text = sim.log_text()
        assert "Scheduler failed" not in text, text[-2000:]
        errors = [r.raw for r in parse_text(text) if r.kind in ("error", "traceback")]
        assert errors == [], errors
