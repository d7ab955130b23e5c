"""Behaviour anchors: the semantics of the installed SGLang 0.5.23 (and torch) the patch
relies on, each asserted on the real code, so a build with other semantics fails a test
named after the semantic instead of misbehaving (the version gate checks names only).

Each anchor is a check (``*_problem``) returning None or what is different; its test runs
it on the installed wheel, and its negative control alters that very semantic (SGLang's
own switch, or the function swapped for a variant) and shows the check names it.
"""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402
from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController  # noqa: E402
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams  # noqa: E402

from server_control.host.ports import free_port  # noqa: E402
from server_control.protocol import decision  # noqa: E402
from server_control.sglang_patch import rank_agreement  # noqa: E402
from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from server_control.sglang_patch.serve import PROJECT_ROOT  # noqa: E402
from tests.sglang.objects import Recorder, build_worker, decode_batch, runtime_state  # noqa: E402


def _worker(rec: Recorder):
    w = build_worker(ew.EAGLEWorkerV2, rec)
    w._draft_worker.draft_runner = SimpleNamespace(draft_attn_backend="d", attn_backend="a")
    return w


# 1. forward_batch_generation with speculative_num_steps == 0 skips drafting, verifies one
#    token (a plain target decode) and STILL runs draft-extend (the draft's KV stays warm).


def steps0_problem(forward) -> str | None:
    rec = Recorder()
    w = _worker(rec)
    ew.EAGLEWorkerV2.apply_runtime_state.__wrapped__(w, runtime_state(0))
    forward(w, decode_batch(3))
    calls = rec.take()
    want = [("verify", 1, "EagleVerifyInput"), ("draft_extend", 1)]
    return None if calls == want else f"steps=0 decode step ran {calls}, not {want}"


def test_anchor_steps0_branch_keeps_draft_extend(publish):
    publish()
    assert steps0_problem(ew.EAGLEWorkerV2.forward_batch_generation.__wrapped__) is None


def test_anchor_steps0_negative_control_draft_extend_skipped(publish, monkeypatch):
    publish()
    monkeypatch.setenv("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", "1")  # SGLang's own switch
    monkeypatch.setattr(
        ew.EAGLEWorkerV2,
        "_stub_skipped_draft_extend",  # its stub: device edge
        lambda self, batch, batch_output: None,
    )
    problem = steps0_problem(ew.EAGLEWorkerV2.forward_batch_generation.__wrapped__)
    assert problem is not None and "draft_extend" not in problem.split(", not")[0]


# 2. KV reserved per request per decode step is sized by the draft-token count published at
#    start-up (max_speculative_num_draft_tokens), not the active state's: swapping in the
#    steps=0 state (one draft token) does not shrink the reservation.


def kv_problem() -> str | None:
    from sglang.srt.mem_cache.allocation_sizing import get_alloc_len_per_decode

    w = _worker(Recorder())
    before = get_alloc_len_per_decode()
    ew.EAGLEWorkerV2.apply_runtime_state.__wrapped__(w, runtime_state(0))
    after = get_alloc_len_per_decode()
    if before != 4 or after != before:
        return (
            f"KV per decode step: {before} with 4 draft tokens, {after} after the "
            "steps=0 swap (expected 4 and 4: sized by max_speculative_num_draft_tokens)"
        )
    return None


def test_anchor_kv_per_decode_step_is_sized_by_the_published_max(publish):
    publish(page_size=1)
    assert kv_problem() is None


def test_anchor_kv_negative_control_sized_by_the_active_state(publish, monkeypatch):
    import sglang.srt.mem_cache.allocation_sizing as sizing
    from sglang.srt.runtime_context import get_spec

    publish(page_size=1)
    monkeypatch.setattr(sizing, "max_speculative_num_draft_tokens", lambda: get_spec().speculative_num_draft_tokens)
    assert kv_problem() is not None


# 3. _override_worker_state(cuda_graph_bs=None) leaves the decode graph buckets (and graphs
#    on) as they are: the steps=0 build with None captures every bucket.


def override_problem() -> str | None:
    from sglang.srt.runtime_context import get_exec

    w = _worker(Recorder())

    def graph():
        return (list(get_exec().graph.cuda_graph_bs_decode or []), get_exec().graph.disable_cuda_graph)

    outside = graph()
    with w._override_worker_state(0, 1, cuda_graph_bs=None):
        with_none = graph()
    with w._override_worker_state(0, 1, cuda_graph_bs=[]):
        with_empty = graph()
    if with_none != outside:
        return f"cuda_graph_bs=None changed the decode graphs {outside} -> {with_none}"
    if with_empty == outside:
        return "cuda_graph_bs=[] did not change the decode graphs (the check sees nothing)"
    return None


def test_anchor_override_worker_state_ignores_cuda_graph_bs_none(publish):
    publish(cuda_graph_bs_decode=[1, 2, 4, 8], disable_cuda_graph=False)
    assert override_problem() is None


def test_anchor_override_negative_control_none_prunes(publish, monkeypatch):
    publish(cuda_graph_bs_decode=[1, 2, 4, 8], disable_cuda_graph=False)
    original = ew.EAGLEWorkerV2._override_worker_state

    def none_prunes(self, steps, tokens, cuda_graph_bs=None):
        return original(self, steps, tokens, cuda_graph_bs=[] if cuda_graph_bs is None else cuda_graph_bs)

    monkeypatch.setattr(ew.EAGLEWorkerV2, "_override_worker_state", none_prunes)
    assert "cuda_graph_bs=None changed" in override_problem()


# 4. AdaptiveSpeculativeParams keeps the bucket list in _cuda_graph_bs (None until
#    set_cuda_graph_bs with a list); cuda_graph_bs_for_step(s) is None only then, else the
#    buckets whose tier can reach s. AdaptiveController keeps its states in _states by step.


def _params(tmp_path, tiers):
    cfg = tmp_path / f"adaptive{len(tiers)}.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": tiers}}))
    return AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(cfg)), str(cfg)


def params_problem(tmp_path) -> str | None:
    with_zero, _ = _params(tmp_path, [0, 1, 3])
    without, _ = _params(tmp_path, [1, 3])
    got = [with_zero._cuda_graph_bs, with_zero.cuda_graph_bs_for_step(0)]
    with_zero.set_cuda_graph_bs([8, 1, 4, 2])
    without.set_cuda_graph_bs([8, 1, 4, 2])
    got += [with_zero._cuda_graph_bs, with_zero.cuda_graph_bs_for_step(0), without.cuda_graph_bs_for_step(0)]
    want = [None, None, [1, 2, 4, 8], [1, 2, 4, 8], []]
    return None if got == want else f"bucket lists {got}, expected {want}"


def test_anchor_adaptive_params_cuda_graph_bs(tmp_path):
    assert params_problem(tmp_path) is None


def test_anchor_params_negative_control_none_for_every_step(tmp_path, monkeypatch):
    monkeypatch.setattr(AdaptiveSpeculativeParams, "cuda_graph_bs_for_step", lambda self, step: None)
    assert params_problem(tmp_path) is not None


def controller_problem(publish, tmp_path) -> str | None:
    params, cfg = _params(tmp_path, [0, 1, 3])
    publish(speculative_adaptive=True, speculative_adaptive_config=cfg)
    rec = Recorder()
    w = _worker(rec)
    controller = AdaptiveController(w, params)
    controller.register(runtime_state(3))
    controller.init_states(None)
    states = getattr(controller, "_states", None)
    if not isinstance(states, dict) or sorted(states) != [0, 1, 3]:
        return f"AdaptiveController._states is {states!r}, not its states by step 0, 1, 3"
    if states[0].speculative_num_steps != 0 or (0, 1, None) not in rec.built:
        return f"the steps=0 state was not built with cuda_graph_bs=None ({rec.built})"
    return None


def test_anchor_adaptive_controller_states_by_step(publish, tmp_path):
    assert controller_problem(publish, tmp_path) is None


def test_anchor_controller_negative_control_states_elsewhere(publish, tmp_path, monkeypatch):
    original = AdaptiveController.init_states

    def elsewhere(self, cuda_graph_bs=None):
        original(self, cuda_graph_bs)
        self._built, self._states = self._states, {}

    monkeypatch.setattr(AdaptiveController, "init_states", elsewhere)
    assert "_states" in controller_problem(publish, tmp_path)


# 5. torch's private distributed_c10d._get_default_store gives the world group's store
#    (set/get/wait/check used by rank_agreement); without it the patch says why and is off
#    on every rank, never raising into SGLang.

STORE_PROBE = """
import datetime, sys
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
from server_control.sglang_patch import rank_agreement
if sys.argv[1] == "remove":
    del c10d._get_default_store
try:
    store = rank_agreement.default_store()
    store.set("specconsole/anchor", "v")
    store.wait(["specconsole/anchor"], datetime.timedelta(seconds=5))
    assert store.check(["specconsole/anchor"]) and store.get("specconsole/anchor") == b"v"
    print("STORE OK", type(store).__name__)
except RuntimeError as exc:
    print("STORE MISSING", exc)
dist.destroy_process_group()
"""


def _probe(mode: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", STORE_PROBE % free_port(), mode], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_anchor_c10d_default_store():
    assert "STORE OK" in _probe("keep")


def test_anchor_store_negative_control_gone_gives_the_clear_fallback():
    out = _probe("remove")
    assert "STORE OK" not in out
    assert "STORE MISSING " + rank_agreement.STORE_MISSING in out


def test_store_fallback_turns_the_switch_off_with_the_reason(monkeypatch):
    import torch.distributed.distributed_c10d as c10d

    monkeypatch.delattr(c10d, "_get_default_store")
    monkeypatch.setattr(rank_agreement, "tp_group", lambda: SimpleNamespace(rank_in_group=0, world_size=2, ranks=[0, 1]))
    dyn = patch_worker.DynamicSpeculation(decision.SpecSwitch(4, 1, 10, "auto"), None)
    assert rank_agreement.settle(dyn, None) is False
    assert not dyn.active and rank_agreement.STORE_MISSING in dyn.reason
