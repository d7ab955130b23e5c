"""Ranks never size their KV pools differently: each rank reports the memory it would take
out of its KV budget for the target-only state through a real torch TCPStore (the kind
SGLang's process group rendezvous uses), and takes it only when every rank reported the same
figure; otherwise no rank takes any and every rank turns the switch off with one reason.
The real (patched) ``KVCacheConfigurator._profile_available_bytes`` asks for that verdict
(test_kv_reserve.py), and a refused reserve turns the switch off at the worker's set-up.

Negative control (by hand): ``judge`` returning each rank's own figure when they differ
fails ``test_ranks_with_different_reserves_take_none_and_say_why``."""

import threading

import pytest

torch = pytest.importorskip("torch", reason="needs torch (installed with sglang)")
pytestmark = pytest.mark.sglang

from torch.distributed import TCPStore  # noqa: E402

from server_control.host.ports import free_port  # noqa: E402
from server_control.sglang_patch import reserve_agreement as ra  # noqa: E402
from server_control.sglang_patch.reserve_agreement import Figure, ReserveVerdict  # noqa: E402


def run_ranks(figures: list, timeout: float = 5.0) -> list:
    """Each rank (a thread with its own store client) runs ``agree``; a None figure is a
    rank that never reports (no patch there). Returns the verdicts by rank."""
    port = free_port()
    master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    verdicts: list = [None] * len(figures)

    def one(i: int) -> None:
        store = master if i == 0 else TCPStore("127.0.0.1", port, is_master=False)
        verdicts[i] = ra.agree(figures[i], store, i, len(figures), timeout)

    threads = [threading.Thread(target=one, args=(i,)) for i, f in enumerate(figures) if f is not None]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return verdicts


def test_ranks_with_one_reserve_all_take_it():
    verdicts = run_ranks([Figure(0.012, "estimate")] * 3)
    assert verdicts == [ReserveVerdict(0.012, None, ranks=3)] * 3


def test_the_same_figure_from_other_sources_is_one_reserve():
    verdicts = run_ranks([Figure(0.5, "estimate"), Figure(0.5, "SPECCONSOLE_DYNSPEC_RESERVE_GIB")])
    assert verdicts == [ReserveVerdict(0.5, None, ranks=2)] * 2


def test_ranks_with_different_reserves_take_none_and_say_why():
    """Node 1 has SPECCONSOLE_DYNSPEC_RESERVE_GIB set, node 0 estimates: the pools would
    differ by 0.488 GiB; every rank sizes its pool as SGLang alone would, off for one reason."""
    verdicts = run_ranks([Figure(0.012, "estimate"), Figure(0.5, "SPECCONSOLE_DYNSPEC_RESERVE_GIB")])
    assert {v.gib for v in verdicts} == {0.0}
    (reason,) = {v.reason for v in verdicts}
    assert reason == (
        "the ranks would size their KV pools differently (rank 0: 0.012 GiB (estimate); rank 1: 0.500 GiB "
        "(SPECCONSOLE_DYNSPEC_RESERVE_GIB)): nothing is taken out of any rank's KV cache budget; the switch "
        "is off on every rank"
    )


def test_a_rank_that_takes_none_for_its_own_reason_differs_too():
    verdicts = run_ranks([Figure(0.012, "estimate"), Figure(0.0, "none: refused")])
    assert all(v.gib == 0.0 and v.reason and "rank 1: 0.000 GiB (none: refused)" in v.reason for v in verdicts)


def test_a_silent_rank_turns_the_others_off_after_the_timeout():
    verdicts = run_ranks([Figure(0.012, "estimate"), None, Figure(0.012, "estimate")], timeout=1.5)
    assert verdicts[1] is None  # it never took part
    for v in (verdicts[0], verdicts[2]):
        assert v.gib == 0.0 and v.reason.startswith(
            "rank 1 did not report the memory reserved for the target-only state within 2 s"
        )


def test_an_unreadable_report_counts_as_none():
    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    store.set(ra.KEY.format(rank=1), "not json")
    verdict = ra.agree(Figure(0.1, "estimate"), store, 0, 2, 1.0)
    assert verdict.gib == 0.0 and verdict.reason.startswith("rank 1 did not report")


def test_a_single_process_takes_its_own_figure():
    """No process group (tests, a one-rank server without one): nothing to compare."""
    assert ra.settle(Figure(0.25, "estimate")) == ReserveVerdict(0.25, None)
