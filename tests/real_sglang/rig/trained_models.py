"""Tiny target + EAGLE-3 draft TRAINED on a period-k language (test rig only); the trained
weights are kept as test data (``DATA_DIR``) and checked at every build; ``--write-data``
retrains them.

The language: ``PERIOD`` random tokens, then the same block again and again, so the next
token is always the one ``PERIOD`` positions back. The target (the rig's Llama shape,
trained with transformers' own ``LlamaForCausalLM``) learns to copy from ``PERIOD`` back.

The draft is a real ``LlamaForCausalLMEagle3`` checkpoint, trained with a pure-torch
replica of SGLang's ``llama_eagle3`` forward (below, ``DraftNet``): at position q it reads
the target's aux hidden states at q (through ``fc``) and the token x[q+1], and predicts
x[q+2] = x[q+2-PERIOD], a token the target's hidden states at q do not carry: it must be
read from the draft's OWN KV cache (the entry of position q+1-PERIOD). Training unrolls
both draft passes SGLang runs with 2 steps: the draft-extend pass (target hidden states)
and the decode pass (the draft's own hidden state, one position further). So greedy
EAGLE-3 accepts ~all drafts when the draft KV is warm, and little for ~PERIOD positions
after its KV went stale (``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1`` skips draft-extend
while target-only).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from . import tiny_models as tm

PERIOD = 12
FIRST_TOKEN = 2  # 0 and 1 are <s> and </s>
LAST_TOKEN = 500  # ids the tokenizer can decode
# (sequence length, batch, steps): short sequences learn the copy fast; the long phase
# teaches it to ignore far positions: trained to 192, right to ~384 (tests and the
# benchmark stay under 256)
TARGET_PHASES = ((64, 32, 300), (192, 8, 150))
DRAFT_PHASES = ((64, 32, 250), (192, 8, 120))
CHECK_SEQ = 320
# the trained weights, kept as test data (~1.4 MB): a cold rig cache loads and checks them
# in seconds instead of training for minutes; ``--write-data`` retrains and rewrites them
DATA_DIR = Path(__file__).resolve().parent / "data" / "trained"


def period_sequences(n: int, length: int, g, period: int = PERIOD):
    """``n`` sequences of ``length`` tokens: a random block of ``period`` repeated."""
    import torch

    block = torch.randint(FIRST_TOKEN, LAST_TOKEN, (n, period), generator=g)
    reps = math.ceil(length / period)
    return block.repeat(1, reps)[:, :length]


def prompt_ids(i: int, length: int = 2 * PERIOD) -> list[int]:
    """A deterministic prompt of the language (prompt ``i``)."""
    import torch

    g = torch.Generator().manual_seed(10_000 + i)
    return period_sequences(1, length, g)[0].tolist()


def _rms(x, w, eps=1e-5):
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, theta=10000.0):
    """Neox-style rotary embedding (HF's rotate_half; SGLang's Llama default). x: [..., T, d]."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.to(torch.float32)[..., None] * inv
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class DraftNet:
    """SGLang's LlamaForCausalLMEagle3 (one input layer) in plain torch, for training."""

    def __init__(self, embed, g):
        import torch

        H, hd = tm.HIDDEN, tm.HIDDEN // tm.HEADS

        def p(*shape, scale=0.05):
            return (torch.randn(*shape, generator=g) * scale).requires_grad_()

        self.embed = embed  # frozen: SGLang gives the draft the target's embedding
        self.w = {
            "fc.weight": p(H, H * len(tm.AUX_LAYER_IDS)),
            "midlayer.hidden_norm.weight": torch.ones(H).requires_grad_(),
            "midlayer.input_layernorm.weight": torch.ones(H).requires_grad_(),
            "midlayer.self_attn.q_proj.weight": p(tm.HEADS * hd, 2 * H),
            "midlayer.self_attn.k_proj.weight": p(tm.KV_HEADS * hd, 2 * H),
            "midlayer.self_attn.v_proj.weight": p(tm.KV_HEADS * hd, 2 * H),
            "midlayer.self_attn.o_proj.weight": p(H, tm.HEADS * hd),
            "midlayer.post_attention_layernorm.weight": torch.ones(H).requires_grad_(),
            "midlayer.mlp.gate_proj.weight": p(tm.INTERMEDIATE, H),
            "midlayer.mlp.up_proj.weight": p(tm.INTERMEDIATE, H),
            "midlayer.mlp.down_proj.weight": p(H, tm.INTERMEDIATE),
            "norm.weight": torch.ones(H).requires_grad_(),
            "lm_head.weight": p(tm.VOCAB_TARGET, H),
        }

    def _qkv(self, tokens, hidden, pos):
        """q, k, v ([B, heads, T, hd]) and the residual for tokens/hidden at positions."""
        import torch

        w, hd = self.w, tm.HIDDEN // tm.HEADS
        x = torch.cat(
            [_rms(self.embed[tokens], w["midlayer.input_layernorm.weight"]), _rms(hidden, w["midlayer.hidden_norm.weight"])], -1
        )
        B, T, _ = x.shape

        def heads(name, n):
            return (x @ w[f"midlayer.self_attn.{name}_proj.weight"].T).view(B, T, n, hd).transpose(1, 2)

        q = _rope(heads("q", tm.HEADS), pos)
        k = _rope(heads("k", tm.KV_HEADS), pos)
        v = heads("v", tm.KV_HEADS)
        rep = tm.HEADS // tm.KV_HEADS
        return q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def _rest(self, attn, residual):
        """o_proj, post-attention norm + MLP, final norm: (logits, pre-norm hidden)."""
        import torch

        w = self.w
        B, _, T, _ = attn.shape
        a = attn.transpose(1, 2).reshape(B, T, -1) @ w["midlayer.self_attn.o_proj.weight"].T
        residual = a + residual
        h = _rms(residual, w["midlayer.post_attention_layernorm.weight"])
        m = (torch.nn.functional.silu(h @ w["midlayer.mlp.gate_proj.weight"].T) * (h @ w["midlayer.mlp.up_proj.weight"].T)) @ w[
            "midlayer.mlp.down_proj.weight"
        ].T
        out = m + residual
        return _rms(out, w["norm.weight"]) @ w["lm_head.weight"].T, out

    def forward(self, tokens, aux):
        """Both passes. tokens: [B, T] (x[q+1] at q), aux: [B, T, 3H] target states at q.
        Returns (extend logits at q: predict x[q+2], decode logits at q: predict x[q+3])."""
        import torch

        B, T = tokens.shape
        scale = 1.0 / math.sqrt(tm.HIDDEN // tm.HEADS)
        pos = torch.arange(T)
        h1 = aux @ self.w["fc.weight"].T
        q1, k1, v1 = self._qkv(tokens, h1, pos)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        s1 = (q1 @ k1.transpose(-1, -2)) * scale
        s1 = s1.masked_fill(~causal, float("-inf"))
        logits1, out1 = self._rest(torch.softmax(s1, -1) @ v1, h1)
        # decode pass: at q+1, token x[q+2] (the first draft), hidden = extend output at q;
        # keys: the extend KV of positions <= q, and its own entry.
        nxt = torch.cat([tokens[:, 1:], tokens[:, -1:]], 1)
        q2, k2, v2 = self._qkv(nxt, out1, pos + 1)
        s_prev = ((q2 @ k1.transpose(-1, -2)) * scale).masked_fill(~causal, float("-inf"))
        s_self = (q2 * k2).sum(-1, keepdim=True) * scale
        probs = torch.softmax(torch.cat([s_prev, s_self], -1), -1)
        attn2 = probs[..., :T] @ v1 + probs[..., T:] * v2
        logits2, _ = self._rest(attn2, out1)
        return logits1, logits2


def _target_config() -> dict:
    return tm._llama_config(architectures=["LlamaForCausalLM"], num_hidden_layers=tm.TARGET_LAYERS)


def _train(params, loss_fn, phases, name: str, log=None) -> None:
    """AdamW with one-cycle LR over ``phases`` of (seq, batch, steps); loss_fn(seq, batch)."""
    import torch

    total = sum(steps for _, _, steps in phases)
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=total, pct_start=0.1)
    step = 0
    for seq, batch, steps in phases:
        for _ in range(steps):
            loss = loss_fn(seq, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            if log and step % 50 == 0:
                log(f"{name} step {step}/{total} (seq {seq}) loss {loss.item():.4f}")
            step += 1


def _target_loss(model, x):
    import torch

    logits = model(input_ids=x).logits[:, PERIOD - 1 : -1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, PERIOD:].reshape(-1))


def train_target(g, phases=TARGET_PHASES, log=None):
    """transformers' LlamaForCausalLM of the rig's shape, trained to copy PERIOD back."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = {k: v for k, v in _target_config().items() if k not in ("architectures", "torch_dtype")}
    model = LlamaForCausalLM(LlamaConfig(**cfg, attn_implementation="sdpa"))
    _train(
        list(model.parameters()), lambda seq, batch: _target_loss(model, period_sequences(batch, seq, g)), phases, "target", log
    )
    model.eval()
    return model


def _aux(target, x):
    """The target's aux hidden states (inputs of layers i+1 for AUX_LAYER_IDS): [B, T, 3H]."""
    import torch

    with torch.no_grad():
        hs = target(input_ids=x, output_hidden_states=True).hidden_states
    return torch.cat([hs[i + 1] for i in tm.AUX_LAYER_IDS], -1)


def draft_batch(target, g, n: int, seq: int):
    """(draft tokens x[q+1], aux at q, pass-1 labels x[q+2], pass-2 labels x[q+3]) for
    q in PERIOD-1 .. seq-4 (positions whose tokens can be read from the draft's KV)."""
    x = period_sequences(n, seq + 1, g)
    aux = _aux(target, x[:, :-1])
    return x[:, 1:], aux, x[:, 2:], x[:, 3:]


def draft_losses(net, batch):
    """Cross-entropy of both passes and their accuracies (scored from q = PERIOD-1)."""
    import torch

    tokens, aux, y1, y2 = batch
    logits1, logits2 = net.forward(tokens, aux)
    lo = PERIOD - 1
    l1, l2 = logits1[:, lo : y2.shape[1]], logits2[:, lo : y2.shape[1]]
    t1, t2 = y1[:, lo : y2.shape[1]], y2[:, lo:]
    ce = torch.nn.functional.cross_entropy
    loss = ce(l1.reshape(-1, l1.shape[-1]), t1.reshape(-1)) + ce(l2.reshape(-1, l2.shape[-1]), t2.reshape(-1))
    acc1 = (l1.argmax(-1) == t1).float().mean().item()
    acc2 = (l2.argmax(-1) == t2).float().mean().item()
    return loss, acc1, acc2


def train_draft(target, g, phases=DRAFT_PHASES, log=None):
    net = DraftNet(target.model.embed_tokens.weight.detach().clone(), g)
    _train(
        list(net.w.values()), lambda seq, batch: draft_losses(net, draft_batch(target, g, batch, seq))[0], phases, "draft", log
    )
    return net


def _check(target, net, g) -> dict:
    """Accuracies on fresh sequences; a training that did not converge is an error here,
    not a puzzling acceptance figure in a server test."""
    import torch

    x = period_sequences(16, CHECK_SEQ, g)
    with torch.no_grad():
        pred = target(input_ids=x).logits.argmax(-1)
        _, a1, a2 = draft_losses(net, draft_batch(target, g, 16, CHECK_SEQ))
    facts = {
        "target_accuracy": (pred[:, PERIOD - 1 : -1] == x[:, PERIOD:]).float().mean().item(),
        "draft_accuracy_extend": a1,
        "draft_accuracy_decode": a2,
    }
    if min(facts.values()) < 0.99:
        raise RuntimeError(f"the rig's trained models did not converge: {facts}")
    return facts


def _trained_pair(seed: int, log):
    """(target, draft net) trained from ``seed`` (~2 min on an idle 2-core machine, 20 on a
    loaded CI machine: why the result is kept as test data, ``DATA_DIR``)."""
    import torch

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    target = train_target(g, log=log)
    return target, train_draft(target, g, log=log)


def _from_data(data_dir: Path):
    """(target, draft net) from the weights kept in ``data_dir``."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = {k: v for k, v in _target_config().items() if k not in ("architectures", "torch_dtype")}
    target = LlamaForCausalLM(LlamaConfig(**{**cfg, "attn_implementation": "sdpa"}))
    target.load_state_dict(load_file(str(data_dir / "target.safetensors")))
    target.eval()
    weights = load_file(str(data_dir / "draft.safetensors"))
    net = DraftNet(weights.pop("embed_tokens.weight"), torch.Generator().manual_seed(0))
    if set(weights) != set(net.w):
        raise RuntimeError(f"{data_dir}: the draft's weights do not match DraftNet: {sorted(set(weights) ^ set(net.w))}")
    net.w = weights
    return target, net


def write_data(data_dir: Path, seed: int = 0, log=print) -> dict:
    """Train from ``seed`` and keep the weights as test data (``python -m
    tests.real_sglang.rig.trained_models --write-data``); returns the training's facts."""
    import time

    import torch
    from safetensors.torch import save_file

    t0 = time.monotonic()
    target, net = _trained_pair(seed, log)
    facts = _check(target, net, torch.Generator().manual_seed(seed + 1))
    data_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in target.state_dict().items()}, str(data_dir / "target.safetensors"))
    draft = {k: v.detach().contiguous() for k, v in net.w.items()}
    draft["embed_tokens.weight"] = net.embed.contiguous()
    save_file(draft, str(data_dir / "draft.safetensors"))
    facts.update(seed=seed, train_s=round(time.monotonic() - t0, 1))
    (data_dir / "training.json").write_text(json.dumps(facts, indent=1) + "\n")
    return facts


def build(target_dir: Path, draft_dir: Path, seed: int = 0, log=print, data_dir: Path | None = None) -> dict:
    """Both models as checkpoints SGLang loads, from the weights kept in ``data_dir``
    (default ``DATA_DIR``; trained afresh from ``seed`` where it holds none), checked on
    fresh sequences either way; returns facts."""
    import time

    import torch
    from safetensors.torch import save_file

    t0 = time.monotonic()
    data_dir = DATA_DIR if data_dir is None else data_dir
    for d in (target_dir, draft_dir):
        d.mkdir(parents=True, exist_ok=True)
        tm._train_tokenizer(d)
    kept = (data_dir / "target.safetensors").is_file() and (data_dir / "draft.safetensors").is_file()
    target, net = _from_data(data_dir) if kept else _trained_pair(seed, log)
    facts = _check(target, net, torch.Generator().manual_seed(seed + 1))
    facts["weights"] = f"kept test data ({data_dir.name})" if kept else f"trained in this build (seed {seed})"
    state = {k: v.detach().contiguous() for k, v in target.state_dict().items()}
    save_file(state, str(target_dir / "model.safetensors"))
    (target_dir / "config.json").write_text(json.dumps(_target_config(), indent=1))
    vocab = tm.VOCAB_TARGET
    draft = {k: v.detach().contiguous() for k, v in net.w.items()}
    draft.update(
        {
            "embed_tokens.weight": net.embed.contiguous(),
            "d2t": torch.zeros(vocab, dtype=torch.int64),
            "t2d": torch.ones(vocab, dtype=torch.bool),
        }
    )
    save_file(draft, str(draft_dir / "model.safetensors"))
    (draft_dir / "config.json").write_text(json.dumps(tm.draft_config(), indent=1))
    facts.update(period=PERIOD, build_s=round(time.monotonic() - t0, 1))
    if not kept:
        facts["train_s"] = facts["build_s"]
    return facts


def main(argv: list[str]) -> int:
    if argv != ["--write-data"]:
        print("usage: python -m tests.real_sglang.rig.trained_models --write-data  (retrain, keep the weights as test data)")
        return 2
    print(json.dumps(write_data(DATA_DIR), indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
