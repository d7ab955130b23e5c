"""Ranks never diverge: every TP rank reports its facts through a real torch TCPStore (the
kind SGLang's process group rendezvous uses), rank 0 judges, every rank reads the same
verdict; a rank that never reports (no patch, another version) turns the switch off on
all the others after the timeout, without any collective left half done."""

import threading
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="needs torch (installed with sglang)")
pytestmark = pytest.mark.sglang

from torch.distributed import TCPStore  # noqa: E402

from server_control.host.ports import free_port  # noqa: E402
from server_control.sglang_patch import build_outcome, rank_agreement  # noqa: E402

SETTINGS = [4, 1, 10, "auto", 0]


def mine(active=True, reason=None, settings=SETTINGS, sglang="0.5.23", patch=None) -> dict:
    out = rank_agreement.facts(active, reason, settings, sglang)
    if patch is not None:
        out["patch"] = patch
    return out


def run_group(per_rank: list, timeout: float = 5.0) -> list:
    """Each rank (a thread with its own store client) runs ``rank_agreement.agree``; a rank whose
    facts are None stays silent (an unpatched rank). Returns the verdicts by rank."""
    port = free_port()
    master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    verdicts: list = [None] * len(per_rank)
    group_ranks = list(range(10, 10 + len(per_rank)))

    def one(i: int) -> None:
        store = master if i == 0 else TCPStore("127.0.0.1", port, is_master=False)
        group = SimpleNamespace(rank_in_group=i, world_size=len(per_rank), ranks=group_ranks)
        verdicts[i] = rank_agreement.agree(per_rank[i], group, store, timeout)

    threads = [threading.Thread(target=one, args=(i,)) for i, f in enumerate(per_rank) if f is not None]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 60)
    return verdicts


def test_unanimous_ranks_agree():
    verdicts = run_group([mine(), mine(), mine(), mine()])
    assert all(v.agreed and v.uniform and v.reason is None for v in verdicts)


def test_one_rank_failing_its_build_turns_every_rank_off_with_the_same_line():
    failure = "could not build the target-only (steps=0) runtime state: RuntimeError('x')"
    verdicts = run_group([mine(), mine(active=False, reason=failure), mine()])
    reasons = {v.reason for v in verdicts}
    assert len(reasons) == 1 and not any(v.agreed for v in verdicts)
    assert reasons.pop() == (f"TP ranks disagree: TP1: {failure}; ready: TP0, TP2; the switch is off on every rank")
    assert all(v.uniform for v in verdicts)  # every rank runs the patch: gathers stay safe
    assert verdicts[2].summary()[1] == {"rank": 1, "active": False, "reason": failure}


def test_a_silent_rank_turns_the_others_off_after_the_timeout():
    verdicts = run_group([mine(), mine(), None], timeout=2.0)
    assert verdicts[2] is None  # it never took part
    for v in verdicts[:2]:
        assert not v.agreed and not v.uniform
        assert v.reason.startswith("TP2 did not report to TP0 within 2 s")
    assert verdicts[0] == verdicts[1]


def test_a_silent_rank_0_leaves_no_rank_switching(monkeypatch):
    monkeypatch.setattr(rank_agreement, "VERDICT_GRACE_S", 1.0)
    verdicts = run_group([None, mine(), mine()], timeout=1.0)
    assert [v.agreed for v in verdicts[1:]] == [False, False]
    assert verdicts[1].reason.startswith("no verdict from TP0 within 2 s")


@pytest.mark.parametrize(
    "other, words",
    [
        (dict(sglang="0.5.22"), "TP ranks run different sglang versions (TP0 0.5.23; TP1 0.5.22)"),
        (dict(patch="0123456789ab"), "TP ranks run different versions of the patch (TP0 "),
        (
            dict(settings=[8, 1, 10, "auto", 0]),
            "TP ranks were started with different settings "
            "[threshold, hysteresis, dwell, force, cold] (TP0 [4, 1, 10, 'auto', 0]; TP1 [8, 1, 10, 'auto', 0])",
        ),
    ],
)
def test_mixed_versions_or_settings_are_named(other, words):
    verdicts = run_group([mine(), mine(**other)])
    assert verdicts[0] == verdicts[1] and not verdicts[0].agreed
    assert verdicts[0].reason.startswith(words)


def test_the_same_refusal_everywhere_is_that_refusal_and_gathers_nothing():
    reason = "attention DP is not supported (adaptive tier decisions are not synchronized ...)"
    refused = rank_agreement.facts(False, reason, SETTINGS, "0.5.23", setup_ok=False)
    verdict = rank_agreement.judge([refused, dict(refused)], 5.0)
    assert verdict.reason == reason and not verdict.agreed
    assert not verdict.uniform  # attention DP / PP: TP ranks do not handle requests in step


def test_live_values_round_trip_and_a_disagreement_is_named():
    from server_control.protocol import decision, rank_verdict

    sw = decision.SpecSwitch(4, 1, 0)
    sw.decide(9)
    row = rank_agreement.encode_live(dict(sw.snapshot(), active=True, num_steps=0, state_memory={"used_gib": 0.5}))
    other = dict(row, threshold=8)  # TP1 holds another threshold
    rows = rank_agreement.decode_live([rank_agreement._pack(row), rank_agreement._pack(other)])
    assert rows[0] == {
        "rank": 0,
        "active": True,
        "threshold": 4,
        "hysteresis": 1,
        "min_dwell_steps": 0,
        "force": "auto",
        "cold_draft_above": 0,
        "mode": "target_only",
        "num_steps": 0,
        "switch_count": 1,
        "last_batch": 9,
        "state_memory": {"used_gib": 0.5},
    }
    assert rank_verdict.disagreement(rows) == "TP1 threshold=8 (TP0: threshold=4)"
    assert rank_verdict.disagreement(rows[:1] * 2) is None


def test_a_failed_rank_is_a_row_that_names_it():
    from server_control.protocol import rank_verdict

    rows = rank_agreement.decode_live(
        [rank_agreement._pack({"failed": "RuntimeError('boom')"}), rank_agreement._pack({"failed": "x" * 5000})]
    )
    assert rows[0] == {"rank": 0, "failed": "rank failed: RuntimeError('boom')"}
    assert rows[1]["failed"].startswith("rank failed: xxx")  # cut to fit the row
    ok = rank_verdict.live_entry(0, {"active": True, "threshold": 4, "mode": "speculative"})
    assert rank_verdict.disagreement([ok, dict(rows[0], rank=1)]) == ("TP1 rank failed: RuntimeError('boom')")


def test_a_second_run_never_reads_the_previous_verdict(monkeypatch):
    """Keys are per run: run 2 of a group whose run 1 agreed must judge afresh (run 1's
    verdict is in the store from the start: a key without the run would read it at once;
    the grace is shortened so the wait for run 2's verdict ends in 1.5 s, not 30.5 s)."""
    monkeypatch.setattr(rank_agreement, "VERDICT_GRACE_S", 1.0)
    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    group = SimpleNamespace(rank_in_group=1, world_size=2, ranks=[0, 1])
    head = SimpleNamespace(rank_in_group=0, world_size=2, ranks=[0, 1])
    store.set(rank_agreement._key(head, "facts/0", 1), __import__("json").dumps(mine()))
    first = rank_agreement.judge([mine(), mine()], 1.0)
    store.set(rank_agreement._key(head, "verdict", 1), first.to_json())
    assert first.agreed
    verdict = rank_agreement.agree(mine(), group, store, 0.5, run=2)  # TP0 never answers run 2
    assert not verdict.agreed and verdict.reason.startswith("no verdict from TP0 within 2 s")


def test_a_build_failure_on_one_rank_stops_every_rank_naming_it(monkeypatch):
    port = free_port()
    master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    monkeypatch.setattr(build_outcome, "SEEN_WAIT_S", 5.0)
    errors: list = [None, None]

    # tp_group is looked up per call: give each thread its own via a thread-local
    import threading as th

    local = th.local()
    monkeypatch.setattr(rank_agreement, "tp_group", lambda: local.group)
    monkeypatch.setattr(rank_agreement, "default_store", lambda: local.store)

    def body(i, failure):
        local.group = SimpleNamespace(rank_in_group=i, world_size=2, ranks=[0, 1])
        local.store = master if i == 0 else TCPStore("127.0.0.1", port, is_master=False)
        try:
            build_outcome.confirm_built(SimpleNamespace(run=7), failure)
        except build_outcome.BuildFailed as exc:
            errors[i] = str(exc)

    threads = [th.Thread(target=body, args=(0, None)), th.Thread(target=body, args=(1, "oom"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors[0] == errors[1]
    assert errors[0].startswith(
        "the target-only (steps=0) build failed after every TP rank agreed to build (TP1: oom); stopping the server"
    )


def test_every_rank_building_passes():
    assert build_outcome.confirm_built(SimpleNamespace(run=1), None) is None  # TP 1: nothing to ask
    with pytest.raises(build_outcome.BuildFailed, match="oom"):
        build_outcome.confirm_built(SimpleNamespace(run=1), "oom")
