"""What the patch uses of SGLang's objects, as ``Protocol`` classes (types only).

mypy never reads SGLang or torch (pyproject.toml: ``follow_imports = "skip"``), so what a
hook receives from them would be untyped; the hooks are typed against these shapes
instead. Each lists exactly the attributes and methods the patch's code uses of one
SGLang 0.5.23 class (named like it; its module in the docstring), typed as SGLang types
them; an attribute the patch only passes back to SGLang is ``object``. Values the patch
reads with ``getattr`` and a default (fields that differ by version or set-up) are not
listed: those parameters are ``object``. A hook's pass-through values (a batch it hands
to the original, the original's result) are ``object`` too.

Also here: ``RankState``, what the patch's parts use of a rank's ``DynamicSpeculation``
(worker.py), so that the parts worker.py imports (startup, rank_agreement, autotune,
metrics, ...) type it without importing worker.py (tests/test_import_cycles.py).

Imports the standard library; ``server_control.protocol`` only for type checking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    import datetime

    from server_control.protocol.cost_curves import CostCounters
    from server_control.protocol.decision import SpecSwitch
    from server_control.protocol.explore import Explorer
    from server_control.protocol.rank_verdict import Verdict

# A torch tensor, untyped as mypy sees torch (not read, see above): the one Any here.
Tensor: TypeAlias = Any


# --- the speculative worker (sglang/srt/speculative/) --------------------------------


class SpecRuntimeState(Protocol):
    """SGLang's ``SpecRuntimeState`` (adaptive_runtime_state.py): a full set of speculative
    resources for one step count; the patch reads its step count and hands it back."""

    speculative_num_steps: int


class AdaptiveSpecPolicy(Protocol):
    """The adaptive controller's ``params`` (adaptive_runtime_state.py)."""

    def cuda_graph_bs_for_step(self, step: int) -> list[int] | None: ...


class AdaptiveController(Protocol):
    """SGLang's ``AdaptiveController`` (adaptive_runtime_state.py): its steps=0 state, reused."""

    params: AdaptiveSpecPolicy
    _states: dict[int, SpecRuntimeState]


class DraftBackbone(Protocol):
    """The draft model's inner ``model``: its final norm (lazy_draft_head.py)."""

    def norm(self, hidden: Tensor) -> Tensor: ...


class LmHead(Protocol):
    """The draft model's ``lm_head`` (a ``ParallelLMHead``)."""

    weight: Tensor


class DraftModel(Protocol):
    """The EAGLE draft model (``draft_runner.model``)."""

    model: DraftBackbone
    lm_head: LmHead


class DraftRunner(Protocol):
    """The draft's ``ModelRunner``."""

    model: DraftModel


class TargetModelRunner(Protocol):
    """The target's ``ModelRunner``: the two resources of a ``SpecRuntimeState`` it holds."""

    attn_backend: object
    decode_cuda_graph_runner: object


class TargetWorker(Protocol):
    """SGLang's ``TpModelWorker`` (the target model's worker)."""

    model_runner: TargetModelRunner


class EagleDraftWorker(Protocol):
    """SGLang's ``EagleDraftWorker`` (eagle_worker_v2.py): the runtime resources a
    ``SpecRuntimeState`` is built from, what lazy_draft_head.py checks and reads, and the
    prefill's draft extend that draft_catch_up.py runs over kept rows."""

    server_args: object
    topk: int
    draft_runner: DraftRunner
    parallel_layout: object
    draft_attn_backend: object
    cuda_graph_runner: object
    draft_extend_attn_backend: object
    cuda_graph_runner_for_draft_extend: object

    def _draft_extend_for_prefill(
        self, batch: object, target_hidden_states: Tensor, next_token_ids: Tensor
    ) -> EagleDraftInput: ...


class EagleDraftInput(Protocol):
    """SGLang's ``EagleDraftInput`` (eagle_info.py), the draft's carried input."""

    hidden_states: Tensor | None
    topk_p: Tensor
    topk_index: Tensor


class GenerationBatchResult(Protocol):
    """SGLang's ``GenerationBatchResult`` (managers/utils.py), marked by the patch with whether
    the step was forced target-only (read back with ``getattr``: worker.on_verified); the next
    draft input that draft_catch_up.py replaces after a catch-up."""

    _specconsole_forced: bool
    next_draft_input: EagleDraftInput


class EagleWorkerV2(Protocol):
    """SGLang's ``EAGLEWorkerV2`` (eagle_worker_v2.py): what the wrappers, the steps=0 build
    and the refusals use of it, and the patch's own ``_dynspec`` on it."""

    _dynspec: RankState
    _draft_worker: EagleDraftWorker | None  # None on a PP stage that hosts no draft
    _target_worker: TargetWorker
    speculative_num_steps: int
    speculative_num_draft_tokens: int
    device: str
    gpu_id: int

    def init_cuda_graphs(self) -> None: ...

    def activate_step_by_batch(self, batch_size: int) -> None: ...

    def forward_batch_generation(self, batch: object, *args: object, **kwargs: object) -> GenerationBatchResult: ...

    def on_verify_complete_cpu(self, num_correct_drafts_per_req: list[int], batch_size: int = 0) -> None: ...

    def build_adaptive_runtime_state(
        self, speculative_num_steps: int, speculative_num_draft_tokens: int, cuda_graph_bs: list[int] | None = None
    ) -> SpecRuntimeState: ...

    def apply_runtime_state(self, state: SpecRuntimeState) -> None: ...


class DraftExtendGraphRunner(Protocol):
    """SGLang's ``EAGLEDraftExtendCudaGraphRunner``: its replay, counted (forwards.py)."""

    def execute(self, *args: object, **kwargs: object) -> object: ...


# --- a verify step's sampling (sglang/srt/speculative/eagle_utils.py eagle_sample) ---------


class ForwardMode(Protocol):
    def is_idle(self) -> bool: ...


class SamplingBatchInfo(Protocol):
    """SGLang's ``SamplingBatchInfo`` (sampling/sampling_batch_info.py)."""

    temperatures: Tensor
    top_ps: Tensor
    top_ks: Tensor
    min_ps: Tensor
    is_all_greedy: bool
    need_top_p_sampling: bool
    need_top_k_sampling: bool
    need_min_p_sampling: bool
    sampling_seed: Tensor | None


class ReqToTokenPool(Protocol):
    """SGLang's ``ReqToTokenPool`` (mem_cache/memory_pool.py): request row, position -> KV slot."""

    req_to_token: Tensor


class ScheduleBatch(Protocol):
    """SGLang's ``ScheduleBatch`` (managers/schedule_batch.py); a decode batch's requests,
    lengths and KV map as draft_catch_up.py reads them."""

    forward_mode: ForwardMode
    sampling_info: SamplingBatchInfo
    reqs: list[object]
    seq_lens: Tensor
    seq_lens_cpu: Tensor | None
    req_pool_indices: Tensor
    req_to_token_pool: ReqToTokenPool
    input_ids: Tensor | None


class EagleVerifyInput(Protocol):
    """SGLang's ``EagleVerifyInput`` (eagle_info.py)."""

    positions: Tensor


class LogitsProcessorOutput(Protocol):
    """SGLang's ``LogitsProcessorOutput`` (layers/logits_processor.py)."""

    next_token_logits: Tensor


# --- the process: parallel groups, the store, the runtime context, the KV budget ---------


class UtilsCommonModule(Protocol):
    """The module ``sglang.srt.utils.common``: its ``configure_logger``, wrapped (targets/common.py)."""

    configure_logger: Callable[..., object]


class EagleWorkerCommonModule(Protocol):
    """The module ``sglang.srt.speculative.eagle_worker_common``: the name ``run_eagle_verify``
    calls ``eagle_sample`` by, wrapped (target_only_sampling.py)."""

    eagle_sample: Callable[..., tuple[Tensor, Tensor, Tensor]]


class GroupCoordinator(Protocol):
    """SGLang's ``GroupCoordinator`` (distributed/parallel_state.py): the TP group."""

    ranks: list[int]
    rank_in_group: int
    world_size: int
    cpu_group: object

    def broadcast(self, input_: Tensor, src: int = 0) -> Tensor: ...


class Store(Protocol):
    """torch.distributed's ``Store`` (the world group's TCPStore), as rank_agreement.py uses it."""

    def set(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> bytes: ...

    def check(self, keys: list[str]) -> bool: ...

    def wait(self, keys: list[str], timeout: datetime.timedelta) -> None: ...


OverridesLog: TypeAlias = list[tuple[str, dict[str, object]]]  # (source, fields) per override


class RuntimeContext(Protocol):
    """SGLang's ``RuntimeContext`` (runtime_context.py, ``get_context()``)."""

    server_args: object
    _overrides_log: OverridesLog

    def override(self, source: str, **fields: object) -> None: ...


class ModelConfig(Protocol):
    """SGLang's ``ModelConfig`` (configs/model_config.py); sizes read with ``getattr``."""

    context_len: int
    hf_text_config: object


class KVCacheConfigurator(Protocol):
    """SGLang's ``KVCacheConfigurator`` (mem_cache/kv_cache_configurator.py)."""

    server_args: object
    model_config: ModelConfig
    page_size: int
    spec_algorithm: object
    is_draft_worker: bool


# --- the patch's own per-rank state (worker.py), for the parts worker.py imports ----------


class AutoTunePort(Protocol):
    """What the rank state's readers use of its in-server tuner (autotune.AutoTune)."""

    applied: int

    def start_line(self) -> str: ...

    def snapshot(self) -> dict[str, object]: ...

    def switch(self, on: bool) -> str: ...

    def operator_threshold(self, value: object) -> None: ...


class RankState(Protocol):
    """What the patch's parts use of a rank's ``DynamicSpeculation`` (worker.py)."""

    switch: SpecSwitch | None
    active: bool
    reason: str | None
    normal_state: SpecRuntimeState | None
    target_only_state: SpecRuntimeState | None
    verdict: Verdict | None
    step_forced: bool | None
    run: int
    state_memory: dict[str, float | None] | None
    forwards: dict[str, dict[str, int]] | None
    limits: dict[str, int | None] | None
    curves: CostCounters | None
    explorer: Explorer
    autotune: AutoTunePort | None

    @property
    def ready(self) -> bool: ...

    def deactivate(self, reason: str) -> None: ...

    def snapshot(self) -> dict[str, object]: ...
