"""The production-cost pair: the trained pair's target made deep, its function unchanged
(test rig and benchmarks only).

On the rig's trained pair the 4-layer target costs about what the draft costs, so a
target-only / plain ratio measured there says nothing about a deployment, where a target
step costs tens of draft-extends. This pair keeps the trained EAGLE-3 draft and gives the
target ``LAYERS`` decoder layers: its own 4, then ``LAYERS - 4`` appended layers whose
output projections (attention ``o_proj`` and MLP ``down_proj``) are zero. Such a layer
adds exactly 0.0 to the residual stream (x + 0.0 == x in IEEE arithmetic), so the deep
target computes the trained target's function bit for bit, while every appended layer
still runs its norms, q/k/v, rotary, attention over its own KV cache, gate/up and the two
zero matmuls: the cost of a layer.

The draft reads the target's auxiliary hidden states at the layer ids of its config
(``eagle_config.eagle_aux_hidden_state_layer_ids`` = [0, 1, 2]; SGLang 0.5.23's
``LlamaForCausalLM.set_eagle3_layers_to_capture`` captures the inputs of layers id + 1,
i.e. 1, 2, 3). Appending after layer 3 shifts none of them, so the draft sees the very
states it was trained on and keeps its acceptance.

``ensure(rig)`` builds it once into ``<rig>/models/deep-<LAYERS>`` (from the cached
trained pair; this module is not one of build.py's stamped sources, so editing it does
not rebuild or retrain the rig). ``build`` checks the claim with transformers' ``LlamaForCausalLM``: logits of the deep and
the source target on fresh sequences must be equal (max |delta| recorded in the facts).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from . import tiny_models as tm

LAYERS = 64  # chosen with benchmarks/rig_cost.py (docs/cpu-rig.md: the ratios)
ZEROED = ("self_attn.o_proj.weight", "mlp.down_proj.weight")


KIND = "deep"


def dir_name(layers: int = LAYERS) -> str:
    return f"deep-{layers}"


def ensure(rig, layers: int = LAYERS):
    """The deep pair of ``rig`` (a build.ModelPair), built on first use (~10 s once the
    trained pair is cached)."""
    from .build import ModelPair, _build_into, ensure_models

    root = rig.root / "models" / dir_name(layers)
    if not (root / "facts.json").is_file():
        source = ensure_models(rig, "trained")
        _build_into(root, "facts.json", lambda tmp: build(source.target, source.draft, tmp / "target", tmp / "draft", layers))
    facts = json.loads((root / "facts.json").read_text())
    return ModelPair(kind=KIND, target=root / "target", draft=root / "draft", facts=facts)


def deepen(state: dict, source_layers: int, layers: int, seed: int = 7) -> dict:
    """``state`` (a Llama target's tensors) with layers ``source_layers .. layers - 1``
    appended: random q/k/v/gate/up (they feed only zero projections), zero o_proj and
    down_proj, unit norms."""
    import torch

    if layers < source_layers:
        raise ValueError(f"cannot make a {source_layers}-layer target {layers} layers deep")
    g = torch.Generator().manual_seed(seed)
    out = dict(state)
    template = {k.split(".", 3)[3]: v for k, v in state.items() if k.startswith(f"model.layers.{source_layers - 1}.")}
    for i in range(source_layers, layers):
        for name, like in template.items():
            if name in ZEROED:
                t = torch.zeros_like(like)
            elif name.endswith("layernorm.weight"):
                t = torch.ones_like(like)
            else:
                t = torch.randn(like.shape, generator=g, dtype=like.dtype) * 0.05
            out[f"model.layers.{i}.{name}"] = t.contiguous()
    return out


def max_logit_delta(source_dir: Path, deep_dir: Path, n: int = 4, length: int = 96) -> float:
    """Largest |logit difference| between the two targets (transformers, float32) on
    ``n`` sequences of the trained language."""
    import torch
    from transformers import LlamaForCausalLM

    from .trained_models import period_sequences

    g = torch.Generator().manual_seed(123)
    x = period_sequences(n, length, g)
    with torch.no_grad():
        a = LlamaForCausalLM.from_pretrained(str(source_dir), torch_dtype=torch.float32)
        b = LlamaForCausalLM.from_pretrained(str(deep_dir), torch_dtype=torch.float32)
        return float((a(input_ids=x).logits - b(input_ids=x).logits).abs().max())


def build(source_target: Path, source_draft: Path, target_dir: Path, draft_dir: Path, layers: int = LAYERS) -> dict:
    """Write the deep target (from ``source_target``) and a copy of the draft; returns
    facts. Raises when the deep target is not the source's function."""
    from safetensors.torch import load_file, save_file

    t0 = time.monotonic()
    config = json.loads((source_target / "config.json").read_text())
    source_layers = int(config["num_hidden_layers"])
    aux = json.loads((source_draft / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    if max(aux) + 1 >= source_layers:
        raise ValueError(f"aux layer ids {aux} read layers the appended ones would follow")
    shutil.copytree(source_draft, draft_dir)
    target_dir.mkdir(parents=True)
    for f in source_target.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            shutil.copy2(f, target_dir / f.name)
    state = deepen(load_file(str(source_target / "model.safetensors")), source_layers, layers)
    save_file(state, str(target_dir / "model.safetensors"))
    (target_dir / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}, indent=1))
    delta = max_logit_delta(source_target, target_dir)
    if delta != 0.0:
        raise RuntimeError(f"the deep target is not the trained one: max |logit delta| {delta}")
    return {
        "layers": layers,
        "source_layers": source_layers,
        "aux_layer_ids": aux,
        "max_logit_delta": delta,
        "hidden": tm.HIDDEN,
        "build_s": round(time.monotonic() - t0, 1),
    }
