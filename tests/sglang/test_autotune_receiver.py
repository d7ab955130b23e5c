"""The in-server tuner on the real ``SchedulerRequestReceiver`` (wrapped through the hook):
TP0 decides from its own cost curves and its move rides ``local_reqs`` through SGLang's
``recv_requests``; the list SGLang's dispatcher gets has no TuneMove and the switch moved;
without the flag nothing is added. Two real processes in a real gloo group (SGLang's
``broadcast_pyobj`` over the TP CPU group): both ranks apply TP0's move at the same
iteration, and the negative control (TP0 applies its move itself, no broadcast) leaves
TP1 behind, which the same check sees."""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import time

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

from sglang.srt.managers.io_struct import AbortReq, SetInternalStateReq  # noqa: E402
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm  # noqa: E402

from server_control.host.ports import free_port  # noqa: E402
from server_control.protocol.tuner import MOVE_PREFIX  # noqa: E402
from server_control.sglang_patch import autotune, gate  # noqa: E402
from tests.sglang.autotune_objects import Clock, Receiver, feed, publish, rank_worker, two_rank_child  # noqa: E402


def tp1_ranks():
    """This process as the only rank of its group (what SGLang writes at start-up)."""
    from sglang.srt.runtime_context import get_parallel

    return get_parallel().override(tp_rank=0, pp_rank=0, attn_tp_rank=0, attn_cp_rank=0)


@pytest.fixture
def tp0(caplog):
    """A TP-1 rank (it pulls) started with --speculative-disable-auto-tune 1-16, N=16."""
    caplog.set_level(logging.INFO)
    gate._reported = None
    override, server_args = publish(16, "1-16")
    worker = rank_worker(server_args)
    dyn = worker._dynspec
    clock = dyn.autotune.clock = Clock()
    receiver = Receiver(server_args)
    with tp1_ranks():
        yield dyn, receiver, clock, worker
    receiver.close()
    autotune._active[0] = None
    override.restore()
    gate._reported = None


def _tuned(dyn, receiver, clock) -> list:
    """One receive at t=0 (the tuner's first reading), then the curves fill and a request
    arrives; the receive at t=6 decides (interval 5 s). The list of the second receive."""
    assert receiver.real.recv_requests(local_reqs=[]) == []
    feed(dyn.curves)
    receiver.send(AbortReq(rid="from-tokenizer"))
    clock.t = 6.0
    return receiver.real.recv_requests(local_reqs=[AbortReq(rid="local-abort")])


def test_tp0_injects_the_move_and_the_dispatcher_never_sees_it(tp0, caplog):
    dyn, receiver, clock, _ = tp0
    assert type(receiver.real).recv_requests.__wrapped__ is not None  # the hook wrapped the class
    got = _tuned(dyn, receiver, clock)
    assert [type(r).__name__ for r in got] == ["AbortReq", "AbortReq"]
    assert [r.rid for r in got] == ["from-tokenizer", "local-abort"]
    assert not any(isinstance(r, autotune.TuneMove) for r in got)
    new = dyn.switch.threshold
    assert new < 16  # the model's crossover is at batch 5: target-only faster above it
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith(MOVE_PREFIX)]
    assert line.startswith(f"{MOVE_PREFIX}16 -> {new} (auto: target-only faster from batch ")
    snap = dyn.snapshot()["auto_tune"]
    assert snap["on"] is True and snap["moves"] == 1 and snap["bounds"] == [1, 16]
    assert snap["last_move"]["old"] == 16 and snap["last_move"]["new"] == new
    assert dyn.autotune.pending is None


def test_the_readback_shows_the_move(tp0):
    from sglang.srt.runtime_context import get_context

    dyn, receiver, clock, _ = tp0
    _tuned(dyn, receiver, clock)
    assert get_context().config_leaf("speculative_disable_batch_threshold") == dyn.switch.threshold < 16


def test_without_the_flag_nothing_is_added(caplog):
    caplog.set_level(logging.INFO)
    override, server_args = publish(16, "")
    worker = rank_worker(server_args)
    dyn = worker._dynspec
    receiver = Receiver(server_args)
    try:
        with tp1_ranks():
            assert autotune.active() is None and dyn.autotune is None
            assert receiver.real.recv_requests(local_reqs=[]) == []
            feed(dyn.curves)
            local = [AbortReq(rid="local-abort")]
            got = receiver.real.recv_requests(local_reqs=local)
            assert [r.rid for r in got] == ["local-abort"]
            assert dyn.switch.threshold == 16 and "auto_tune" not in dyn.snapshot()
    finally:
        receiver.close()
        override.restore()


def test_a_skipped_receive_keeps_the_move_pending(tp0):
    """SGLang's recv_skipper returns [] without broadcasting: the move is offered again."""
    dyn, receiver, clock, _ = tp0
    real = receiver.real
    object.__setattr__(real, "recv_skipper", type("Skip", (), {"handle": lambda self, batch: False})())
    receiver.real.recv_requests(local_reqs=[])
    feed(dyn.curves)
    clock.t = 6.0
    assert real.recv_requests(local_reqs=[]) == [] and dyn.switch.threshold == 16
    assert dyn.autotune.pending is not None
    object.__setattr__(real, "recv_skipper", None)
    assert real.recv_requests(local_reqs=[]) == []
    assert dyn.switch.threshold == dyn.autotune.last.new < 16 and dyn.autotune.pending is None


def test_the_operator_wins_and_the_key_turns_tuning_on_again(tp0, caplog):
    from sglang.srt.managers.scheduler_components.internal_state import SchedulerInternalStateController

    from tests.sglang.objects import scheduler_for

    dyn, receiver, clock, worker = tp0
    controller = SchedulerInternalStateController(
        scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
    )

    def set_state(**values) -> bool:
        return controller.set_internal_state(SetInternalStateReq(server_args=values)).updated

    assert set_state(speculative_disable_batch_threshold=12) is True
    assert dyn.switch.threshold == 12
    snap = dyn.snapshot()["auto_tune"]
    assert snap["on"] is False and snap["off_reason"] == "threshold set to 12 by the operator"
    assert "Dynamic speculation: auto-tune off (threshold set to 12 by the operator)" in caplog.text
    _tuned(dyn, receiver, clock)
    assert dyn.switch.threshold == 12  # off: no move
    assert set_state(speculative_disable_auto_tune=2) is False  # refused with the reason
    assert "refused speculative_disable_auto_tune=2: speculative_disable_auto_tune must be 1 (on) or 0 (off)" in caplog.text
    assert set_state(speculative_disable_auto_tune=1) is True
    assert dyn.snapshot()["auto_tune"]["on"] is True and "Dynamic speculation: auto-tune on" in caplog.text
    clock.t = 7.0
    receiver.real.recv_requests(local_reqs=[])  # the first reading of the new window
    feed(dyn.curves, seed=2, t0=100.0)
    clock.t = 13.0
    receiver.real.recv_requests(local_reqs=[])
    assert dyn.switch.threshold < 12
    assert set_state(speculative_disable_auto_tune=0) is True
    assert dyn.snapshot()["auto_tune"]["off_reason"] == "turned off through /set_internal_state"


def test_the_key_is_refused_without_the_flag(caplog):
    from sglang.srt.managers.scheduler_components.internal_state import SchedulerInternalStateController

    from tests.sglang.objects import scheduler_for

    caplog.set_level(logging.INFO)
    override, server_args = publish(16, "")
    try:
        worker = rank_worker(server_args)
        controller = SchedulerInternalStateController(
            scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
        )
        req = SetInternalStateReq(server_args={"speculative_disable_auto_tune": 1})
        assert controller.set_internal_state(req).updated is False
        assert "the server was started without --speculative-disable-auto-tune LO-HI" in caplog.text
    finally:
        override.restore()


@pytest.mark.parametrize("text", ["16-2", "8", "a-b", "0-4"])
def test_the_flag_refuses_a_bad_value(text, capsys):
    from sglang.srt.server_args import prepare_server_args

    from tests.sglang.objects import require_patched_server_args

    require_patched_server_args()
    args = prepare_server_args(["--model-path", "dummy-model", "--speculative-disable-auto-tune", "2-32"])
    assert args.speculative_disable_auto_tune == "2-32"
    with pytest.raises(SystemExit):
        prepare_server_args(["--model-path", "dummy-model", "--speculative-disable-auto-tune", text])
    assert "auto-tune bounds must" in capsys.readouterr().err


@pytest.fixture(scope="module")
def two_ranks() -> dict:
    """Both variants in one pair of spawned ranks (each process imports SGLang and torch
    once): {tp0_only: {rank: [(names SGLang got, threshold)] per iteration}}."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    variants = (False, True)
    procs = [ctx.Process(target=two_rank_child, args=(r, port, variants, out), daemon=True) for r in (0, 1)]
    for p in procs:
        p.start()
    results: dict = {v: {} for v in variants}
    try:
        deadline = time.monotonic() + 240
        while sum(map(len, results.values())) < len(procs) * len(variants) and time.monotonic() < deadline:
            try:
                rank, tp0_only, seen = out.get(timeout=1)
                results[tp0_only][rank] = seen
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not dead, f"a rank died (exit codes {dead}); its traceback is on stderr"
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return results


def _same_move_at_the_same_iteration(results: dict) -> None:
    tp0, tp1 = results[0], results[1]
    assert [t for _, t in tp0] == [t for _, t in tp1], results
    assert all(names == ["AbortReq"] for names, _ in tp0 + tp1), results  # no TuneMove reaches SGLang


@pytest.mark.timeout(300)
def test_both_ranks_apply_tp0s_move_at_the_same_iteration(two_ranks):
    results = two_ranks[False]
    _same_move_at_the_same_iteration(results)
    assert results[0][0][1] == 16 and results[0][-1][1] < 16, results


@pytest.mark.timeout(300)
def test_negative_control_a_move_applied_on_tp0_alone_leaves_tp1_behind(two_ranks):
    results = two_ranks[True]
    assert results[0][-1][1] < 16 and results[1][-1][1] == 16, results
    with pytest.raises(AssertionError):
        _same_move_at_the_same_iteration(results)
