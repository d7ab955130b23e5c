"""Cold target-only steps keep their rows and one extend catches the draft up, on the real
EAGLEWorkerV2 decode path (tests/sglang/objects.py: the draft's forwards and the verify
are recorded at the device edge): which step catches up, what the extend is given, what
is dropped, and what happens where catch-up is off or fails. The real server's proof
(the draft accepts as warm right after a caught-up cold stretch) is
tests/real_sglang/test_switch_exact.py::TestTrainedCatchUp."""

from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402
import torch  # noqa: E402

from server_control.sglang_patch import draft_catch_up as dcu  # noqa: E402
from tests.sglang.objects import Recorder, started_worker  # noqa: E402

HIDDEN = 6  # the target's captured hidden width (EAGLE-3: three layers' worth; any width here)
# N=4 without dwell, the draft cold above 6: batches of 9 run cold, of 3 resume speculation
SWITCHING = {
    "speculative_disable_batch_threshold": 4,
    "speculative_disable_min_dwell_steps": 0,
    "speculative_disable_cold_draft_above": 6,
}


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    monkeypatch.setattr(dcu, "_state", {"pending": False, "rows": 0, "broken": False, "unreadable": False})
    monkeypatch.setattr(dcu, "_counts", dict.fromkeys(dcu._counts, 0))
    monkeypatch.delenv(dcu.ENV, raising=False)

    def stub(self, batch, batch_output):  # SGLang's zeroed stub (device tensors): recorded
        self._draft_worker.rec.calls.append("stub")
        batch_output.next_draft_input.topk_index = torch.zeros((len(batch.reqs), 1), dtype=torch.int64)

    monkeypatch.setattr(ew.EAGLEWorkerV2, "_stub_skipped_draft_extend", stub)


class Stream:
    """Requests decoding one token a step: each step's batch is the first ``bs`` of them."""

    def __init__(self, n: int = 12, start: int = 20) -> None:
        self.reqs = [SimpleNamespace(rid=f"r{i}") for i in range(n)]
        self.lens = [start + i for i in range(n)]  # each request's committed length
        self.pool = torch.arange(64 * 256, dtype=torch.int32).view(64, 256)  # req_to_token: slot = row*256 + position

    def batch(self, bs: int) -> SimpleNamespace:
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        lens = torch.tensor(self.lens[:bs], dtype=torch.int64)
        return SimpleNamespace(
            forward_mode=ForwardMode.DECODE,
            is_extend_in_batch=False,
            reqs=self.reqs[:bs],
            seq_lens=lens.clone(),
            seq_lens_cpu=lens.clone(),
            seq_lens_sum=int(lens.sum()),
            req_pool_indices=torch.arange(bs, dtype=torch.int64),
            req_to_token_pool=SimpleNamespace(req_to_token=self.pool),
            input_ids=None,
            orig_seq_lens=None,
            spec_info=SimpleNamespace(
                is_verify_input=lambda: False, bonus_tokens=torch.tensor([1000 + p for p in self.lens[:bs]])
            ),
        )

    def advance(self, bs: int) -> None:
        for i in range(bs):
            self.lens[i] += 1


def catch_up_worker(rec: Recorder, publish, *, overlap: bool = False, fail: bool = False, **settings):
    server_args = publish(**settings)
    worker = started_worker(server_args, rec)
    draft = worker._draft_worker
    draft.rec = rec
    draft.topk = 1
    draft.server_args = SimpleNamespace(disable_overlap_schedule=not overlap, pp_size=1)

    def extend(batch, hidden, next_token_ids):
        if fail:
            raise RuntimeError("the draft's extend failed")
        rec.calls.append(
            (
                "catch_up",
                list(batch.extend_lens),
                list(batch.prefix_lens),
                batch.out_cache_loc.tolist(),
                batch.input_ids.tolist(),
                hidden[:, 0].tolist(),
                next_token_ids.tolist(),
            )
        )
        bs = len(batch.extend_lens)
        return SimpleNamespace(
            topk_p=torch.ones((bs, 1)), topk_index=torch.full((bs, 1), 7), hidden_states=torch.full((bs, 3), 2.0)
        )

    draft._draft_extend_for_prefill = extend

    def verify(batch, pp_proxy_tensors=None, grammar_barrier=None):
        info = batch.spec_info
        rec.calls.append(("verify", info.draft_token_num))
        bs = len(batch.reqs)
        hidden = batch.seq_lens.to(torch.float32)[:, None].expand(bs, HIDDEN).clone()  # row = its position
        return SimpleNamespace(
            new_seq_lens=batch.seq_lens + 1,
            next_draft_input=SimpleNamespace(topk_p=None, topk_index=None, hidden_states=None),
            logits_output=SimpleNamespace(hidden_states=hidden),
            next_token_ids=batch.seq_lens + 2000,
        )

    worker.verify = verify
    return worker


def _steps(worker, rec, stream: Stream, batches: list[int]):
    out = []
    for bs in batches:
        result = worker.forward_batch_generation(stream.batch(bs))
        out.append((bs, rec.take(), result))
        stream.advance(bs)
    return out


def _calls(run):
    return [[c if isinstance(c, str) else c[0] for c in calls] for _, calls, _ in run]


def test_a_cold_stretch_is_caught_up_in_one_extend_before_speculation_resumes(publish):
    rec = Recorder()
    worker = catch_up_worker(
        rec,
        publish,
        **SWITCHING,
    )
    rec.take()
    stream = Stream()
    run = _steps(worker, rec, stream, [9, 9, 9, 3, 3])
    assert _calls(run) == [
        ["verify", "stub"],  # cold: rows kept
        ["verify", "stub"],
        ["verify", "stub"],
        ["verify", "stub", "catch_up"],  # the switch says speculative: target-only once more, caught up
        ["draft", "verify", "draft_extend"],  # speculative, from the catch-up's draft input
    ]
    _, lens, prefix, locs, tokens, hidden, tail = run[3][1][-1]
    assert lens == [4, 4, 4]  # three kept rows and the step's own, for the three requests still running
    assert prefix == [20, 21, 22]  # each request's committed length when the stretch began
    assert locs == [r * 256 + p for r in range(3) for p in range(20 + r, 24 + r)]  # req_to_token at those positions
    assert tokens == [1000 + p for r in range(3) for p in range(20 + r, 24 + r)]  # the tokens at them
    assert hidden == [float(p) for r in range(3) for p in range(20 + r, 24 + r)]  # each position's own hidden state
    assert tail == [2000 + 23 + r for r in range(3)]  # the step's next tokens close the rotation
    caught = run[3][2].next_draft_input
    assert caught.topk_index.tolist() == [[7]] * 3 and caught.hidden_states.shape == (3, 3)  # not SGLang's stub
    snap = worker._dynspec.snapshot()
    assert snap["catch_up"] == {"kept": 27, "caught_up": 1, "rows": 12, "dropped": 0}
    assert snap["cold_steps"] == 3 and not dcu.pending()


def test_a_long_stretch_catches_up_when_the_kept_rows_reach_the_bound(publish, monkeypatch):
    monkeypatch.setattr(dcu, "KEEP_ROWS", 16)  # a batch of 2: seven cold steps keep 14, the eighth catches up
    rec = Recorder()
    worker = catch_up_worker(rec, publish, speculative_disable_force_mode="target_only", speculative_disable_cold_draft_above=1)
    rec.take()
    run = _steps(worker, rec, Stream(), [2] * 10)
    calls = _calls(run)
    assert calls[7] == ["verify", "stub", "catch_up"]
    assert all(c == ["verify", "stub"] for i, c in enumerate(calls) if i != 7)
    assert run[7][1][-1][1] == [8, 8]  # seven kept rows and the step's own, each request
    assert worker._dynspec.snapshot()["cold_steps"] == 10  # the catch-up step is a cold step too
    assert worker._dynspec.snapshot()["catch_up"]["rows"] == 16 and dcu.pending()  # the two steps since


def test_a_warm_target_only_step_after_a_cold_stretch_catches_up_instead(publish):
    """Back at or below the mark while target-only: that step catches the kept rows up (its
    own row with them) in place of its one-row extend, so the rows stay contiguous."""
    rec = Recorder()
    worker = catch_up_worker(
        rec,
        publish,
        speculative_disable_force_mode="target_only",
        speculative_disable_cold_draft_above=6,
    )
    rec.take()
    run = _steps(worker, rec, Stream(), [9, 9, 5, 5])
    assert _calls(run) == [["verify", "stub"], ["verify", "stub"], ["verify", "stub", "catch_up"], ["verify", "draft_extend"]]
    assert run[2][1][-1][1] == [3] * 5


def test_when_the_requests_that_kept_rows_have_ended_nothing_catches_up(publish):
    """A cold stretch whose requests all end: the next requests' warm target-only step runs
    SGLang's one-row extend, and speculation resumes without a catch-up step."""
    rec = Recorder()
    worker = catch_up_worker(
        rec,
        publish,
        speculative_disable_batch_threshold=1,
        speculative_disable_min_dwell_steps=0,
        speculative_disable_cold_draft_above=3,
    )
    rec.take()
    stream = Stream()
    cold = _steps(worker, rec, stream, [4, 4])
    assert dcu.pending()
    stream.reqs = [SimpleNamespace(rid=f"new{i}") for i in range(len(stream.reqs))]  # the four ended; new ones run
    later = _steps(worker, rec, stream, [2, 1])
    assert _calls(cold) + _calls(later) == [
        ["verify", "stub"],
        ["verify", "stub"],
        ["verify", "draft_extend"],  # target-only at or below the mark: warm, no catch-up
        ["draft", "verify", "draft_extend"],  # resumes at once
    ]
    assert not dcu.pending() and worker._dynspec.snapshot()["catch_up"]["caught_up"] == 0


def test_rows_that_do_not_end_at_the_step_are_dropped():
    """A request retracted and prefilled again, or an explored speculative step between:
    only the contiguous run ending right before the step's position is caught up."""
    req = SimpleNamespace()
    req.__dict__[dcu.ROWS] = [(p, None, None) for p in (10, 11, 13, 14)]
    assert [r[0] for r in dcu._run(req, 15)] == [13, 14]
    assert dcu.counts()["dropped"] == 2 and dcu.ROWS not in req.__dict__
    req.__dict__[dcu.ROWS] = [(p, None, None) for p in (10, 11)]
    assert dcu._run(req, 15) == []


def test_where_catch_up_is_off_a_cold_step_is_sglangs_skip_alone(publish, caplog, monkeypatch):
    monkeypatch.setenv(dcu.ENV, "0")
    rec = Recorder()
    worker = catch_up_worker(
        rec,
        publish,
        **SWITCHING,
    )
    rec.take()
    with caplog.at_level("INFO", logger=dcu.logger.name):
        run = _steps(worker, rec, Stream(), [9, 9, 3])
    assert _calls(run) == [["verify", "stub"], ["verify", "stub"], ["draft", "verify", "draft_extend"]]
    assert dcu.OFF_LINE.format(why=f"{dcu.ENV}=0") in caplog.text
    assert worker._dynspec.snapshot()["catch_up"]["kept"] == 0


def test_a_batch_without_cpu_lengths_keeps_nothing_and_says_so_once(publish, caplog):
    rec = Recorder()
    worker = catch_up_worker(rec, publish, speculative_disable_force_mode="target_only", speculative_disable_cold_draft_above=1)
    rec.take()
    stream = Stream()
    with caplog.at_level("INFO", logger=dcu.logger.name):
        for _ in range(3):
            batch = stream.batch(2)
            batch.seq_lens_cpu = None  # a GPU-only batch: no host copy of the lengths
            worker.forward_batch_generation(batch)
            stream.advance(2)
    assert [c if isinstance(c, str) else c[0] for c in rec.take()] == ["verify", "stub"] * 3
    assert caplog.text.count(dcu.OFF_LINE.format(why="a decode batch without its CPU sequence lengths")) == 1
    assert not dcu.pending()


def test_a_failed_catch_up_is_said_once_and_the_draft_stays_cold(publish, caplog):
    rec = Recorder()
    worker = catch_up_worker(
        rec,
        publish,
        fail=True,
        **SWITCHING,
    )
    rec.take()
    with caplog.at_level("WARNING", logger=dcu.logger.name):
        run = _steps(worker, rec, Stream(), [9, 3, 3, 9, 3])
    # the catch-up step still serves its tokens with SGLang's stub; from then on no rows are
    # kept, and resuming is not delayed
    assert _calls(run) == [
        ["verify", "stub"],
        ["verify", "stub"],
        ["draft", "verify", "draft_extend"],
        ["verify", "stub"],
        ["draft", "verify", "draft_extend"],
    ]
    assert run[1][2].next_draft_input.topk_index.tolist() == [[0]] * 3
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Dynamic speculation: the draft's catch-up")]
    assert lines == [dcu.FAILED_LINE.format(why='RuntimeError("the draft\'s extend failed")')]
    assert worker._dynspec.snapshot()["catch_up"] == {"kept": 9, "caught_up": 0, "rows": 0, "dropped": 0}
