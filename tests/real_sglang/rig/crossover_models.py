"""The crossover pair: the trained pair's target made wide, its draft made fallible, so that
speculation wins at low concurrency and loses under load on this CPU, as on a GPU (test rig
and benchmarks only).

On the trained and deep pairs a speculative step's cost grows per *request*, so speculation
wins at every batch and there is no crossover to find. A GPU's (and this CPU's, for wide
float32 matmuls) step cost is flat while reading the weights bounds it, then linear in the
*tokens* of the step; a verify carries ``steps + 1`` tokens a request where target-only
carries one, so target-only wins once the step's token cost outweighs the acceptance.

The wide target: the trained target with every MLP ``WIDTH`` wide instead of 128: the
appended gate/up rows and down columns are zero. silu(0) * 0 = 0, so an appended unit adds
0.0 to the residual stream, while every appended row and column is still multiplied: about
``WIDTH * 64 * 3 * 4`` float32 weights a layer, far larger than the caches. The build checks
the claim with transformers' ``LlamaForCausalLM``: on fresh sequences the wide target's
greedy tokens equal the trained target's (``argmax_equal``) and its logits differ at most
by summation order (``max_logit_delta``, recorded).

The fallible draft: the trained draft, whose ``lm_head`` rows of a share ``WRONG`` of the
language's tokens are rotated among themselves: where the right next token is one of them,
the draft proposes another; elsewhere it is right as before. So each draft token is
accepted with probability ~``1 - WRONG`` and a verify of ``steps`` drafts commits
``1 + p + p^2 + ...`` tokens: the acceptance is chosen, not hoped for. The build measures
the draft's accuracy on fresh sequences with the replica the training uses (``DraftNet``).

``ensure(rig)`` builds it once into ``<rig>/models/crossover-...`` from the cached trained
pair (~10 s; this module is not one of build.py's stamped sources).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from . import tiny_models as tm

KIND = "crossover"
WIDTH = 131072  # MLP width: 4 layers x 3 x 64 x WIDTH float32 = 400 MB of weights
WRONG = 0.08  # share of the language's tokens the draft gets wrong (benchmarks/mode_cost.py chose it: docs/cpu-rig.md)
MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")


def dir_name(width: int = WIDTH, wrong: float = WRONG) -> str:
    return f"{KIND}-w{width}-q{round(wrong * 100)}"


def ensure(rig, width: int = WIDTH, wrong: float = WRONG):
    """The crossover pair of ``rig`` (a build.ModelPair), built on first use."""
    from .build import ModelPair, _build_into, ensure_models

    root = rig.root / "models" / dir_name(width, wrong)
    if not (root / "facts.json").is_file():
        source = ensure_models(rig, "trained")
        _build_into(
            root, "facts.json", lambda tmp: build(source.target, source.draft, tmp / "target", tmp / "draft", width, wrong)
        )
    facts = json.loads((root / "facts.json").read_text())
    return ModelPair(kind=KIND, target=root / "target", draft=root / "draft", facts=facts)


def widen(state: dict, layers: int, width: int) -> dict:
    """``state`` (a Llama target's tensors) with every MLP ``width`` wide: zero gate/up rows
    and zero down columns appended."""
    import torch

    out = dict(state)
    for i in range(layers):
        for name in MLP:
            key = f"model.layers.{i}.{name}"
            w = state[key]
            if name == "mlp.down_proj.weight":
                pad = torch.zeros(w.shape[0], width - w.shape[1], dtype=w.dtype)
                out[key] = torch.cat([w, pad], 1).contiguous()
            else:
                pad = torch.zeros(width - w.shape[0], w.shape[1], dtype=w.dtype)
                out[key] = torch.cat([w, pad], 0).contiguous()
    return out


def wrong_tokens(wrong: float, seed: int = 11) -> list[int]:
    """The language's tokens the draft gets wrong: a share ``wrong`` of them, drawn once."""
    import torch

    from .trained_models import FIRST_TOKEN, LAST_TOKEN

    g = torch.Generator().manual_seed(seed)
    ids = torch.arange(FIRST_TOKEN, LAST_TOKEN)
    n = round(wrong * len(ids))
    return sorted(ids[torch.randperm(len(ids), generator=g)[:n]].tolist())


def mislead(lm_head, tokens: list[int]):
    """``lm_head`` with the rows of ``tokens`` rotated by one among themselves: the hidden
    state that chose ``tokens[i]`` now chooses ``tokens[i + 1]``."""
    out = lm_head.clone()
    if len(tokens) > 1:
        rotated = tokens[1:] + tokens[:1]
        out[rotated] = lm_head[tokens]
    return out.contiguous()


def _check_target(source_dir: Path, wide_dir: Path, n: int = 4, length: int = 96) -> dict:
    import torch
    from transformers import LlamaForCausalLM

    from .trained_models import period_sequences

    x = period_sequences(n, length, torch.Generator().manual_seed(123))
    with torch.no_grad():
        a = LlamaForCausalLM.from_pretrained(str(source_dir), torch_dtype=torch.float32)(input_ids=x).logits
        b = LlamaForCausalLM.from_pretrained(str(wide_dir), torch_dtype=torch.float32)(input_ids=x).logits
    facts = {"max_logit_delta": float((a - b).abs().max()), "argmax_equal": bool((a.argmax(-1) == b.argmax(-1)).all())}
    if not facts["argmax_equal"] or facts["max_logit_delta"] > 1e-3:
        raise RuntimeError(f"the wide target is not the trained one: {facts}")
    return facts


def _draft_accuracy(source_target: Path, draft_weights: dict) -> dict:
    """The fallible draft's accuracy (both passes) on fresh sequences of the language."""
    import torch
    from transformers import LlamaForCausalLM

    from .trained_models import CHECK_SEQ, DraftNet, draft_batch, draft_losses

    target = LlamaForCausalLM.from_pretrained(str(source_target), torch_dtype=torch.float32)
    target.eval()
    w = dict(draft_weights)
    net = DraftNet(w.pop("embed_tokens.weight"), torch.Generator().manual_seed(0))
    net.w = {k: w[k] for k in net.w}
    g = torch.Generator().manual_seed(321)
    with torch.no_grad():
        _, a1, a2 = draft_losses(net, draft_batch(target, g, 16, CHECK_SEQ))
    return {"draft_accuracy_extend": round(a1, 4), "draft_accuracy_decode": round(a2, 4)}


def build(
    source_target: Path, source_draft: Path, target_dir: Path, draft_dir: Path, width: int = WIDTH, wrong: float = WRONG
) -> dict:
    """Write the wide target and the fallible draft; returns facts. Raises when the wide
    target is not the trained one, or the draft's accuracy is not ~``1 - wrong``."""
    from safetensors.torch import load_file, save_file

    t0 = time.monotonic()
    config = json.loads((source_target / "config.json").read_text())
    if width < int(config["intermediate_size"]):
        raise ValueError(f"cannot make an MLP of {config['intermediate_size']} {width} wide")
    target_dir.mkdir(parents=True)
    draft_dir.mkdir(parents=True)
    for src, dst in ((source_target, target_dir), (source_draft, draft_dir)):
        for f in src.iterdir():
            if f.name not in ("model.safetensors", "config.json"):
                shutil.copy2(f, dst / f.name)
    state = widen(load_file(str(source_target / "model.safetensors")), int(config["num_hidden_layers"]), width)
    save_file(state, str(target_dir / "model.safetensors"))
    (target_dir / "config.json").write_text(json.dumps({**config, "intermediate_size": width}, indent=1))
    shutil.copy2(source_draft / "config.json", draft_dir / "config.json")
    draft = load_file(str(source_draft / "model.safetensors"))
    tokens = wrong_tokens(wrong)
    draft["lm_head.weight"] = mislead(draft["lm_head.weight"], tokens)
    save_file(draft, str(draft_dir / "model.safetensors"))
    facts = {"width": width, "wrong_share": wrong, "wrong_tokens": len(tokens), "hidden": tm.HIDDEN}
    facts.update(_check_target(source_target, target_dir))
    facts.update(_draft_accuracy(source_target, draft))
    low, high = 1 - wrong - 0.06, 1 - wrong + 0.06
    if not all(low <= facts[k] <= high for k in ("draft_accuracy_extend", "draft_accuracy_decode")):
        raise RuntimeError(f"the fallible draft's accuracy is not ~{1 - wrong:.2f}: {facts}")
    facts["target_params_m"] = round(sum(t.numel() for t in state.values()) / 1e6, 1)
    facts["build_s"] = round(time.monotonic() - t0, 1)
    return facts
