"""Minimal constructed objects around the REAL SGLang classes (no re-implementation).

The worker is ``object.__new__(EAGLEWorkerV2)`` with the attributes its real methods
read; the draft worker, target runner and ``verify`` (the GPU kernels) are recorded
stand-ins at the device edge. Everything between (the patched ``activate_step_by_batch``,
SGLang's ``apply_runtime_state``, its ``forward_batch_generation`` branches and its
``_build_trivial_verify_input``) is SGLang's own code.
"""

from types import SimpleNamespace

import torch


def runtime_state(steps: int):
    from sglang.srt.speculative.adaptive_runtime_state import SpecRuntimeState

    return SpecRuntimeState(
        speculative_num_steps=steps,
        speculative_num_draft_tokens=steps + 1,
        draft_attn_backend=f"draft_attn[{steps}]",
        cuda_graph_runner=f"draft_graphs[{steps}]",
        target_attn_backend=SimpleNamespace(name=f"target_attn[{steps}]", verify_mask=None),
        target_graph_runner=f"target_graphs[{steps}]",
        draft_extend_attn_backend=f"extend_attn[{steps}]",
        cuda_graph_runner_for_draft_extend=f"extend_graphs[{steps}]",
    )


class Recorder:
    """What the device edge was asked to do, step by step."""

    def __init__(self) -> None:
        self.calls: list = []
        self.built: list = []

    def take(self) -> list:
        out, self.calls = self.calls, []
        return out


def build_worker(cls, rec: Recorder, steps: int = 3, topk: int = 1):
    import sglang.srt.speculative.eagle_worker_v2 as ew

    normal = runtime_state(steps)

    def draft(batch):
        rec.calls.append("draft")
        return SimpleNamespace(is_verify_input=lambda: True, kv_loc_plan=None, draft_token_num=steps + 1)

    def draft_extend(batch, batch_output, kv_loc_plan=None):
        rec.calls.append(("draft_extend", batch.spec_info.draft_token_num))

    draft_worker = SimpleNamespace(
        speculative_num_steps=steps,
        speculative_num_draft_tokens=steps + 1,
        draft_attn_backend=normal.draft_attn_backend,
        cuda_graph_runner=normal.cuda_graph_runner,
        draft_extend_attn_backend=normal.draft_extend_attn_backend,
        cuda_graph_runner_for_draft_extend=normal.cuda_graph_runner_for_draft_extend,
        draft_runner=SimpleNamespace(),
        graph_memory_usage={},
        parallel_layout=SimpleNamespace(tp_group=None),
        init_cuda_graphs=lambda: rec.calls.append("draft_init_cuda_graphs"),
        _rebuild_topk1_chain_buffers=lambda: None,
        draft=draft,
        _draft_extend_for_decode=draft_extend,
    )
    worker = object.__new__(cls)
    worker.__dict__.update(
        server_args=None,
        topk=topk,
        speculative_num_steps=steps,
        speculative_num_draft_tokens=steps + 1,
        device="cpu",
        page_size=1,
        speculative_algorithm=ew.SpeculativeAlgorithm.EAGLE3,
        enable_dp_spec_prefill_coordination=False,
        _hosts_draft=True,
        _draft_worker=draft_worker,
        adaptive_controller=None,
        _additional_graph_memory_usage={},
        _additional_graph_time_usage={},
        _target_worker=SimpleNamespace(
            model_runner=SimpleNamespace(
                attn_backend=normal.target_attn_backend, decode_cuda_graph_runner=normal.target_graph_runner
            )
        ),
    )

    def verify(batch, pp_proxy_tensors=None, grammar_barrier=None):
        spec_info = batch.spec_info
        rec.calls.append(("verify", spec_info.draft_token_num, type(spec_info).__name__))
        return SimpleNamespace(new_seq_lens=batch.seq_lens + 1, next_draft_input=None)

    def build_state(speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None):
        rec.built.append((speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs))
        return runtime_state(speculative_num_steps)

    worker.verify = verify  # the target forward: device edge
    worker.build_adaptive_runtime_state = build_state  # CUDA-graph capture: device edge
    return worker


def started_worker(server_args, rec: Recorder, **kwargs):
    """A constructed worker through the patched real ``init_cuda_graphs`` (one rank)."""
    import sglang.srt.speculative.eagle_worker_v2 as ew

    from server_control.sglang_patch import worker as patch_worker

    worker = build_worker(ew.EAGLEWorkerV2, rec, **kwargs)
    worker._dynspec = patch_worker.init_state(worker, server_args, ew.EAGLEWorkerV2)
    worker.init_cuda_graphs()  # the patched real method
    return worker


def decode_batch(bs: int):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return SimpleNamespace(
        forward_mode=ForwardMode.DECODE,
        is_extend_in_batch=False,
        seq_lens=torch.full((bs,), 16, dtype=torch.int64),
        seq_lens_sum=16 * bs,
        seq_lens_cpu=None,
        spec_info=SimpleNamespace(is_verify_input=lambda: False, bonus_tokens=torch.arange(bs, dtype=torch.int64)),
    )


def require_patched_server_args() -> None:
    """In-process tests need this process's ServerArgs built with the new fields."""
    from sglang.srt.server_args import ServerArgs

    from server_control.sglang_patch.fields import missing_fields

    missing = missing_fields(ServerArgs)
    assert not missing, (
        f"ServerArgs in this pytest process lacks {missing}: sglang.srt.server_args was "
        "imported before tests/sglang/conftest.py installed the hook (a module collected "
        "earlier imported it); run tests/sglang on its own or import SGLang lazily there"
    )


def scheduler_for(draft_worker, algorithm):
    """The attributes SchedulerInternalStateController reads off its Scheduler."""
    reporter = SimpleNamespace(
        last_gen_throughput=12.5, spec_total_num_accept_tokens=30, spec_total_num_forward_ct=10, step_time_dict={}
    )
    model_runner = SimpleNamespace(weight_load_mem_usage=1.0)
    return SimpleNamespace(
        draft_worker=draft_worker,
        spec_algorithm=algorithm,
        startup_time=0.0,
        max_running_requests=64,
        metrics_reporter=reporter,
        rust_server=None,
        tp_worker=SimpleNamespace(model_runner=model_runner, graph_memory_usage={}),
        token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: SimpleNamespace(mem_usage=0.5)),
        startup_available_gpu_memory_gb=10.0,
        max_total_num_tokens=4096,
        swa_tokens_per_layer=None,
    )


def server_info_entry(worker) -> dict:
    """The worker's rank entry of /server_info internal_states, through the real controller."""
    from sglang.srt.managers.io_struct import GetInternalStateReq
    from sglang.srt.managers.scheduler_components.internal_state import (
        SchedulerInternalStateController,
    )
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    controller = SchedulerInternalStateController(
        scheduler=scheduler_for(worker, SpeculativeAlgorithm.EAGLE3), record_step_time=False
    )
    return controller.get_internal_state(GetInternalStateReq()).internal_state
