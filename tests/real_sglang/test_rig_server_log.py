"""A rig server's log is its own: two servers of one name (SGLang's adaptive with its default
config and with a tuned one were both ``crossover-adaptive``) appended to one file, and the
second was "ready" at once on the first's ready line. ``mode_cost`` then paused it while it
still started, and its first measured window failed to connect (four runs of four, 31-256
``ConnectError``s, docs/cpu-rig.md). No SGLang here: a process that prints the ready line
late stands in for the server."""

from __future__ import annotations

import sys
import time

import pytest

from tests.real_sglang.rig.pool import PORT_ATTEMPTS, OneAtATime, Spec
from tests.real_sglang.rig.server import READY_LINE, PortTaken, RigServer
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


BIND_ERROR = "[2026-12-07 13:11:05] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 45707): address already in use"


def _taken_then_alive() -> list[str]:
    """SGLang when its HTTP port was taken: uvicorn says so and ends, the process stays."""
    return [sys.executable, "-c", f"import time; time.sleep(0.5); print({BIND_ERROR!r}, flush=True); time.sleep(60)"]


def test_a_port_taken_before_the_server_bound_it_is_said_at_once(tmp_path, monkeypatch):
    """A CI run waited 600 s for an nnodes-2 server whose HTTP port another process took in
    the ~35 s its start took (the log said so at once, the process lived on). The wait now
    ends as soon as the log says it, on this server's log or another node's (``also``)."""
    starts: list[str] = []
    monkeypatch.setattr(run_figures, "record", starts.append)
    env = {"PATH": "/usr/bin:/bin"}
    taken = RigServer.start(_taken_then_alive(), env, tmp_path / "node0.log", port=1, lifetime_s=60)
    never = RigServer.start(_late_ready(60), env, tmp_path / "head.log", port=2, lifetime_s=60)
    other = RigServer.start(_taken_then_alive(), env, tmp_path / "node1.log", port=3, lifetime_s=60)
    try:
        t0 = time.monotonic()
        with pytest.raises(PortTaken, match="address already in use"):
            taken.wait_ready(timeout_s=20)
        with pytest.raises(PortTaken, match="node1.log"):
            never.wait_ready(timeout_s=20, also=(other,))
        assert time.monotonic() - t0 < 10
        assert [", port taken, " in s for s in starts] == [True, True], starts
    finally:
        for server in (taken, never, other):
            assert server.stop(grace_s=5) == []


def test_the_pool_starts_a_server_again_when_its_port_was_taken(tmp_path, monkeypatch):
    """``OneAtATime.get`` starts the server again (the launcher picks new ports) when the
    port was taken, up to ``PORT_ATTEMPTS`` times; each failed start is stopped."""
    monkeypatch.setattr(run_figures, "record", lambda line: None)
    env = {"PATH": "/usr/bin:/bin"}
    launched: list[RigServer] = []
    plan = iter([_taken_then_alive(), _late_ready(0.2)])

    def launcher(rig, spec, log_dir, lifetime_s):
        launched.append(RigServer.start(next(plan), env, log_dir / f"{spec.name}.log", port=len(launched), lifetime_s=60))
        return launched[-1]

    spec = Spec("trained", paths=("target", "draft"))
    pool = OneAtATime(rig=None, log_dir=tmp_path, lifetime_s=60, launcher=launcher)  # type: ignore[arg-type]
    try:
        assert pool.get(spec) is launched[1] and len(launched) == 2
        assert not launched[0].processes() and pool.left == []  # the failed start, stopped
    finally:
        pool.close()
    assert pool.left == []

    def always_taken(rig, spec, log_dir, lifetime_s):
        launched.append(RigServer.start(_taken_then_alive(), env, log_dir / f"{spec.name}.log", port=9, lifetime_s=60))
        return launched[-1]

    before = len(launched)
    pool = OneAtATime(rig=None, log_dir=tmp_path, lifetime_s=60, launcher=always_taken)  # type: ignore[arg-type]
    with pytest.raises(PortTaken):
        pool.get(spec)
    assert len(launched) - before == PORT_ATTEMPTS and pool.spec is None and pool.server is None
    assert pool.left == [] and not any(s.processes() for s in launched)


def test_a_fault_check_never_reads_a_lost_port_as_the_server_ending(tmp_path, monkeypatch):
    """gpu-check's fault checks ask whether a server ended ('exited'): a start that lost its
    port ends SGLang's HTTP server too, and must not pass for the fault's effect."""
    from tests.real_sglang.rig.gpu_checks_faults import _wait

    monkeypatch.setattr(run_figures, "record", lambda line: None)
    server = RigServer.start(_taken_then_alive(), {"PATH": "/usr/bin:/bin"}, tmp_path / "s.log", port=1, lifetime_s=60)
    try:
        with pytest.raises(PortTaken):
            _wait(server, 20)
    finally:
        assert server.stop(grace_s=5) == []
