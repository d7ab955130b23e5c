"""Register the rig's pure-torch ``torch.ops.sgl_kernel.*_cpu`` operators (test rig only).

SGLang's ``intel_amx`` attention backend and its CPU speculative path call these; the
CUDA-only sgl-kernel wheel does not ship them. ``register()`` is idempotent and leaves any
operator that already exists (a real CPU build of sgl-kernel) alone.
"""

from __future__ import annotations

import torch

from . import attention_ops, sampling_ops, spec_ops

# name -> (schema arguments, implementation). Mutated tensors carry alias annotations.
OPS: dict[str, tuple[str, object]] = {
    "assign_req_to_token_pool_cpu": (
        "(Tensor req_pool_indices, Tensor(a!) req_to_token, Tensor start_offset, "
        "Tensor end_offset, Tensor out_cache_loc, int pool_len) -> ()",
        spec_ops.assign_req_to_token_pool,
    ),
    "assign_extend_cache_locs_cpu": (
        "(Tensor req_pool_indices, Tensor req_to_token, Tensor start_offset, "
        "Tensor end_offset, Tensor(a!) out_cache_loc, int pool_len) -> ()",
        spec_ops.assign_extend_cache_locs,
    ),
    "assign_draft_cache_locs_contiguous_cpu": (
        "(Tensor req_pool_indices, Tensor req_to_token, Tensor seq_lens, "
        "Tensor(a!) out_cache_loc, int pool_len, int topk, int num_steps) -> ()",
        spec_ops.assign_draft_cache_locs_contiguous,
    ),
    "build_draft_decode_metadata_cpu": (
        "(Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, int topk, int num_steps, int pool_len) -> Tensor",
        spec_ops.build_draft_decode_metadata,
    ),
    "fill_bonus_tokens_cpu": (
        "(Tensor accept_tokens, Tensor accept_lens, Tensor(a!) bonus_tokens, int accept_stride) -> ()",
        spec_ops.fill_bonus_tokens,
    ),
    "fill_accept_out_cache_loc_cpu": (
        "(Tensor accept_index, Tensor out_cache_loc, Tensor(a!) accept_out_cache_loc) -> ()",
        spec_ops.fill_accept_out_cache_loc,
    ),
    "rotate_input_ids_cpu": (
        "(Tensor(a!) input_ids, Tensor extend_start_loc, Tensor extend_seq_lens, "
        "Tensor topk_index, Tensor? select_index=None) -> ()",
        spec_ops.rotate_input_ids,
    ),
    "verify_tree_greedy_cpu": (
        "(Tensor(a!) predicts, Tensor(b!) accept_index, Tensor(c!) accept_token_num, "
        "Tensor candidates, Tensor retrive_index, Tensor retrive_next_token, "
        "Tensor retrive_next_sibling, Tensor target_predict) -> ()",
        spec_ops.verify_tree_greedy,
    ),
    "build_tree_kernel_efficient_cpu": (
        "(Tensor parent_list, Tensor selected_index, Tensor verified_seq_len, "
        "Tensor(a!) tree_mask, Tensor(b!) positions, Tensor(c!) retrive_index, "
        "Tensor(d!) retrive_next_token, Tensor(e!) retrive_next_sibling, int topk, int depth, "
        "int draft_token_num, int tree_mask_mode) -> ()",
        spec_ops.build_tree_kernel_efficient,
    ),
    "copy_all_layer_kv_cache_cpu": (
        "(Tensor data_ptrs, Tensor strides, Tensor tgt_loc, Tensor src_loc) -> ()",
        spec_ops.copy_all_layer_kv_cache,
    ),
    "murmur_hash32_cpu": (
        "(Tensor seed, Tensor positions, Tensor col_indices) -> Tensor",
        sampling_ops.murmur_hash32,
    ),
    "decode_attention_cpu": (
        "(Tensor query, Tensor(a!) k_cache, Tensor(b!) v_cache, float k_scale, float v_scale, "
        "Tensor(c!) output, Tensor? key, Tensor? value, Tensor loc, Tensor attn_logits, "
        "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float sm_scale, "
        "float logit_cap, bool is_cross_attention, int sliding_window_size, "
        "Tensor? encoder_lens, Tensor? sinks) -> ()",
        attention_ops.decode_attention,
    ),
    "extend_attention_cpu": (
        "(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, Tensor(a!) o_extend, "
        "Tensor k_buffer, Tensor v_buffer, float k_scale, float v_scale, Tensor req_to_token, "
        "Tensor req_pool_indices, Tensor seq_lens, Tensor extend_seq_lens, "
        "Tensor extend_start_loc, int? max_len_extend, float sm_scale, float logit_cap, "
        "bool is_cross_attention, int sliding_window_size, Tensor? encoder_lens, "
        "Tensor? sinks, Tensor? tree_mask, bool is_causal) -> ()",
        attention_ops.extend_attention,
    ),
}

_LIB: torch.library.Library | None = None
REGISTERED: list[str] = []


def _exists(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"sgl_kernel::{name}", "")
        return True
    except RuntimeError:
        return False


def register() -> list[str]:
    """Define and implement (CPU dispatch key) every missing operator; returns their names."""
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("sgl_kernel", "FRAGMENT")
    for name, (schema, fn) in OPS.items():
        if name in REGISTERED or _exists(name):
            continue
        _LIB.define(name + schema)
        _LIB.impl(name, fn, "CPU")
        REGISTERED.append(name)
    return list(REGISTERED)
