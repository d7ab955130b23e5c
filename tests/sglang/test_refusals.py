"""The patch refuses what SGLang refuses for its own runtime-state swap
(``--speculative-adaptive``): each refusal leaves the worker speculating, builds nothing,
and gives its reason in the one NOT active line and in /server_info."""

from types import SimpleNamespace

import pytest

pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
pytestmark = pytest.mark.sglang

import sglang.srt.speculative.eagle_worker_v2 as ew  # noqa: E402

from server_control.sglang_patch import worker as patch_worker  # noqa: E402
from tests.sglang.conftest import lines  # noqa: E402
from tests.sglang.objects import Recorder, build_worker, decode_batch, server_info_entry, started_worker  # noqa: E402

NOT_ACTIVE = "Dynamic speculation disable NOT active: "
ON = dict(speculative_disable_batch_threshold=4, speculative_disable_min_dwell_steps=0)


def assert_refused(worker, rec, caplog, reason: str) -> None:
    assert lines(caplog, "NOT active") == [NOT_ACTIVE + reason]
    assert not worker._dynspec.active and rec.built == []  # no steps=0 state built
    worker.forward_batch_generation(decode_batch(32))
    assert worker.speculative_num_steps == 3  # untouched: plain speculation
    live = server_info_entry(worker)["dynamic_speculation"]
    assert live["active"] is False and live["reason"] == reason
    assert not lines(caplog, "Dynamic speculation disable enabled")


def test_topk_above_one_is_refused_with_sglangs_reason(publish, caplog):
    server_args = publish(speculative_eagle_topk=4, speculative_num_draft_tokens=8, **ON)
    rec = Recorder()
    assert_refused(started_worker(server_args, rec), rec, caplog, "speculative_eagle_topk=4 (only topk=1 is supported)")


def test_other_workers_built_on_eagle_are_refused(publish, caplog):
    from sglang.srt.speculative.standalone_worker_v2 import StandaloneWorkerV2

    server_args = publish(**ON)
    worker = build_worker(StandaloneWorkerV2, Recorder())
    dyn = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    assert not dyn.active
    assert lines(caplog, "NOT active") == [
        NOT_ACTIVE + "speculative worker StandaloneWorkerV2 is not EAGLEWorkerV2 (only "
        "EAGLE/EAGLE3 on the standard worker have the steps=0 target-only path)"
    ]


LORA = (
    "LoRA is enabled: the runtime-state swap does not rebuild LoRA CUDA-graph metadata "
    "(SGLang refuses --speculative-adaptive with LoRA for the same reason, "
    "arg_groups/lora_hook.py)"
)


@pytest.mark.parametrize(
    "lora",
    [
        dict(enable_lora=True, max_lora_rank=8, lora_target_modules=["q_proj"]),
        dict(lora_paths=["adapter=/nonexistent/adapter"]),  # enable_lora resolves to True
    ],
)
def test_lora_is_refused_as_sglang_refuses_it_with_adaptive(publish, caplog, lora):
    from sglang.srt.arg_groups.lora_hook import check_lora_speculative_compatibility
    from sglang.srt.runtime_context import get_context

    adaptive = get_context().override_server_args(speculative_algorithm="EAGLE3", speculative_adaptive=True, enable_lora=True)
    with adaptive as adaptive_args, pytest.raises(ValueError, match="--speculative-adaptive"):
        check_lora_speculative_compatibility(adaptive_args)  # SGLang's own refusal
    server_args = publish(**lora, **ON)
    rec = Recorder()
    assert_refused(started_worker(server_args, rec), rec, caplog, LORA)


def test_lora_explicitly_off_is_not_refused(publish, caplog):
    server_args = publish(enable_lora=False, lora_paths=["adapter=/nonexistent"], **ON)
    worker = started_worker(server_args, Recorder())
    assert worker._dynspec.active and not lines(caplog, "NOT active")


def test_hisparse_is_refused(publish, caplog):
    server_args = publish(enable_hisparse=True, **ON)
    rec = Recorder()
    assert_refused(
        started_worker(server_args, rec),
        rec,
        caplog,
        "HiSparse (--enable-hisparse) speculative decoding uses statically sized swap "
        "state (SGLang refuses --speculative-adaptive with it, "
        "arg_groups/hisparse_hook.py)",
    )


def test_a_pd_disaggregation_decode_server_is_refused(publish, caplog):
    server_args = publish(disaggregation_mode="decode", **ON)
    rec = Recorder()
    assert_refused(
        started_worker(server_args, rec),
        rec,
        caplog,
        "PD disaggregation decode server (--disaggregation-mode decode): its results "
        "arrive through process_batch_result_prebuilt, which the patch does not "
        "cover (not tested)",
    )


def test_a_pd_disaggregation_prefill_server_is_refused(publish, caplog):
    """It never decodes: a steps=0 state there would only take memory."""
    server_args = publish(disaggregation_mode="prefill", **ON)
    rec = Recorder()
    assert_refused(
        started_worker(server_args, rec),
        rec,
        caplog,
        "PD disaggregation prefill server (--disaggregation-mode prefill): it never "
        "decodes, so a target-only state would only take memory",
    )


@pytest.mark.parametrize(
    "pp_spec, reason",
    [
        ("0", "pipeline parallelism (pp_size=2) is not supported (only the last stage hosts the draft model)"),
        (
            "1",
            "pipeline parallelism (pp_size=2) with SGLANG_ENABLE_PP_SPEC: the PP relay slices "
            "results with the configured draft-token count (SGLang refuses it with "
            "--speculative-adaptive, arg_groups/validation_hook.py)",
        ),
    ],
)
def test_pipeline_parallelism_is_refused(publish, caplog, monkeypatch, pp_spec, reason):
    from sglang.srt.runtime_context import get_parallel

    monkeypatch.setenv("SGLANG_ENABLE_PP_SPEC", pp_spec)
    server_args = publish(**ON)
    with get_parallel().override(pp_size=2):
        worker = build_worker(ew.EAGLEWorkerV2, Recorder())
        worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    assert lines(caplog, "NOT active") == [NOT_ACTIVE + reason]


def _qsa_draft_worker(steps: int):
    """An EagleDraftWorker whose draft model asks for QSA MTP index sharing, with SGLang's
    real QSA backend classes (constructed bare) so its own check can turn sharing on."""
    import torch
    from sglang.srt.layers.attention.qsa.qsa_indexer import QSAIndexer
    from sglang.srt.layers.attention.qwen_sparse_attn_backend import QwenSparseAttnBackend, QwenSparseMultiStepDraftBackend

    per_step = [object.__new__(QwenSparseAttnBackend) for _ in range(steps)]
    multi = object.__new__(QwenSparseMultiStepDraftBackend)
    multi.attn_backends = per_step
    indexer = object.__new__(QSAIndexer)
    object.__setattr__(indexer, "layer_id", 0)
    dw = object.__new__(ew.EagleDraftWorker)
    dw.__dict__.update(
        topk=1,
        speculative_num_steps=steps,
        draft_attn_backend=multi,
        draft_extend_attn_backend=object.__new__(QwenSparseAttnBackend),
        draft_runner=SimpleNamespace(
            model_config=SimpleNamespace(hf_config=SimpleNamespace(index_share_for_mtp_iteration=True)),
            model=SimpleNamespace(modules=lambda: [indexer]),
            token_to_kv_pool=SimpleNamespace(qsa_token_topk=8, qsa_compress_ratio=4),
            req_to_token_pool=SimpleNamespace(req_to_token=torch.zeros(4, 16)),
            device="cpu",
        ),
    )
    return dw


@pytest.mark.parametrize("adaptive", [False, True])
def test_qsa_index_sharing_is_refused_when_sglang_turned_it_on(publish, caplog, adaptive):
    server_args = publish(speculative_adaptive=adaptive, **ON)
    dw = _qsa_draft_worker(steps=3)
    ew.EagleDraftWorker._configure_qsa_mtp_index_share(dw)  # SGLang's own decision
    shared = getattr(dw.draft_extend_attn_backend, "_mtp_shared_sparse_indices", None) is not None
    assert shared is (not adaptive)  # SGLang turns sharing off under --speculative-adaptive
    worker = build_worker(ew.EAGLEWorkerV2, Recorder())
    worker._draft_worker.draft_extend_attn_backend = dw.draft_extend_attn_backend
    caplog.clear()
    worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    if adaptive:
        assert worker._dynspec.active
    else:
        assert lines(caplog, "NOT active") == [
            NOT_ACTIVE + "QSA MTP index sharing (index_share_for_mtp_iteration) is on: its index "
            "buffers belong to one runtime state (SGLang turns it off under "
            "--speculative-adaptive, speculative/eagle_worker_v2.py)"
        ]


def test_refused_rank_answers_false_to_the_runtime_keys(publish, caplog):
    from sglang.srt.managers.io_struct import SetInternalStateReq
    from sglang.srt.managers.scheduler_components.internal_state import SchedulerInternalStateController
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from tests.sglang.objects import scheduler_for

    server_args = publish(enable_hisparse=True, **ON)
    worker = started_worker(server_args, Recorder())
    controller = SchedulerInternalStateController(
        scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
    )
    req = SetInternalStateReq(server_args={"speculative_disable_batch_threshold": 8})
    assert controller.set_internal_state(req).updated is False
    assert lines(caplog, "refused speculative_disable_batch_threshold=8")[0].endswith(
        "dynamic speculation disable is not active on this rank (HiSparse (--enable-hisparse) "
        "speculative decoding uses statically sized swap state (SGLang refuses "
        "--speculative-adaptive with it, arg_groups/hisparse_hook.py))"
    )


def test_a_reserve_refused_before_the_pool_turns_the_switch_off_at_the_set_up(publish, caplog, monkeypatch):
    """The KV budget was sized without the steps=0 state's memory (the ranks would have
    taken different amounts, or a bad figure: targets/kv_cache_configurator.py): the worker
    must not build the state. Before, a bad SPECCONSOLE_DYNSPEC_RESERVE_GIB was said NOT
    active at the configurator and the worker built the state anyway."""
    from server_control.sglang_patch import reserve

    why = (
        "the ranks would size their KV pools differently (rank 0: 0.012 GiB (estimate); rank 1: 0.500 GiB "
        "(SPECCONSOLE_DYNSPEC_RESERVE_GIB)): nothing is taken out of any rank's KV cache budget; the switch "
        "is off on every rank"
    )
    monkeypatch.setattr(reserve, "_refused", [why])
    server_args = publish(**ON)
    rec = Recorder()
    assert_refused(started_worker(server_args, rec), rec, caplog, why)
