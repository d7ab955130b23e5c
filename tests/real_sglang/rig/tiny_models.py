"""Tiny Llama target + LlamaForCausalLMEagle3 draft, built offline (test rig only).

* The tokenizer is a byte-level BPE trained here with the ``tokenizers`` library.
* ``constant=True`` (the default) builds models whose greedy choice is always the same
  token, whatever the input: every layer's output projections are zero, so the residual
  stream is the token embedding, whose dimension 0 is a large positive constant; both
  lm_heads are zero except the constant token's row, which reads dimension 0. The draft
  sees the target's hidden states through ``fc``, whose output dimension 0 copies input
  dimension 0. Greedy EAGLE-3 then accepts every draft token: accept length = steps + 1
  while speculating, exactly 1.00 when the target decodes alone.
* ``constant=False`` gives random weights (accept length ~1.00).
"""

from __future__ import annotations

import json
from pathlib import Path

HIDDEN = 64
INTERMEDIATE = 128
HEADS = 4
KV_HEADS = 2
TARGET_LAYERS = 4
AUX_LAYER_IDS = [0, 1, 2]  # sglang captures the input of layers i+1
VOCAB_TARGET = 512
CONSTANT_WORD = " hello"
MAX_POSITIONS = 2048

_CORPUS_WORDS = (
    "hello world the quick brown fox jumps over the lazy dog speculative decoding "
    "draft target model token batch threshold console server switch accept length "
    "alpha beta gamma delta one two three four five six seven eight nine ten"
).split()

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


def _train_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET - 8,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [" ".join(_CORPUS_WORDS[(i * 7 + j * 3) % len(_CORPUS_WORDS)] for j in range(12)) for i in range(400)]
    tok.train_from_iterator(lines, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return fast


def _llama_config(**extra) -> dict:
    cfg = {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HIDDEN // HEADS,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": MAX_POSITIONS,
        "vocab_size": VOCAB_TARGET,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "attention_bias": False,
        "mlp_bias": False,
    }
    cfg.update(extra)
    return cfg


def _layer(prefix: str, g, constant: bool, qkv_in: int, hidden_norm: bool) -> dict:
    import torch

    head_dim = HIDDEN // HEADS

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.05

    def out_proj(*shape):
        return torch.zeros(*shape) if constant else rnd(*shape)

    w = {
        f"{prefix}.self_attn.q_proj.weight": rnd(HEADS * head_dim, qkv_in),
        f"{prefix}.self_attn.k_proj.weight": rnd(KV_HEADS * head_dim, qkv_in),
        f"{prefix}.self_attn.v_proj.weight": rnd(KV_HEADS * head_dim, qkv_in),
        f"{prefix}.self_attn.o_proj.weight": out_proj(HIDDEN, HEADS * head_dim),
        f"{prefix}.mlp.gate_proj.weight": rnd(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.up_proj.weight": rnd(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.down_proj.weight": out_proj(HIDDEN, INTERMEDIATE),
        f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN),
    }
    if hidden_norm:
        w[f"{prefix}.hidden_norm.weight"] = torch.ones(HIDDEN)
    return w


def _head(rows: int, token: int, g, constant: bool):
    import torch

    if not constant:
        return torch.randn(rows, HIDDEN, generator=g) * 0.05
    head = torch.zeros(rows, HIDDEN)
    head[token, 0] = 8.0
    return head


def draft_config() -> dict:
    return _llama_config(
        architectures=["LlamaForCausalLMEagle3"],
        num_hidden_layers=1,
        draft_vocab_size=VOCAB_TARGET,
        target_hidden_size=HIDDEN,
        eagle_config={"eagle_aux_hidden_state_layer_ids": AUX_LAYER_IDS, "use_aux_hidden_state": True},
    )


def build(target_dir: Path, draft_dir: Path, constant: bool = True, seed: int = 0) -> dict:
    """Write both model directories; returns facts the tests need (the constant token)."""
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    target_dir.mkdir(parents=True, exist_ok=True)
    draft_dir.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer(target_dir)
    _train_tokenizer(draft_dir)
    ids = tok.encode(CONSTANT_WORD, add_special_tokens=False)
    token = ids[0]

    embed = torch.randn(VOCAB_TARGET, HIDDEN, generator=g) * 0.5
    if constant:
        embed[:, 0] = 10.0
    target = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": _head(VOCAB_TARGET, token, g, constant),
    }
    for i in range(TARGET_LAYERS):
        target.update(_layer(f"model.layers.{i}", g, constant, HIDDEN, hidden_norm=False))
    save_file({k: v.contiguous() for k, v in target.items()}, str(target_dir / "model.safetensors"))
    (target_dir / "config.json").write_text(
        json.dumps(_llama_config(architectures=["LlamaForCausalLM"], num_hidden_layers=TARGET_LAYERS), indent=1)
    )

    fc = torch.randn(HIDDEN, HIDDEN * len(AUX_LAYER_IDS), generator=g) * 0.05
    if constant:
        fc[0, :] = 0.0
        fc[0, 0] = 1.0
    draft = {
        "fc.weight": fc,
        "norm.weight": torch.ones(HIDDEN),
        "embed_tokens.weight": embed.clone(),
        "lm_head.weight": _head(VOCAB_TARGET, token, g, constant),
        "d2t": torch.zeros(VOCAB_TARGET, dtype=torch.int64),
        "t2d": torch.ones(VOCAB_TARGET, dtype=torch.bool),
    }
    draft.update(_layer("midlayer", g, constant, 2 * HIDDEN, hidden_norm=True))
    save_file({k: v.contiguous() for k, v in draft.items()}, str(draft_dir / "model.safetensors"))
    (draft_dir / "config.json").write_text(json.dumps(draft_config(), indent=1))
    return {"constant_token_id": token, "constant_text": tok.decode([token]), "constant": constant}
