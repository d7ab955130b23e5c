"""scripts/gpu-check's options (test rig only): parsing, validation and the defaults that
depend on the pair.

Without ``--model``/``--draft-model`` the script trains and serves the rig's tiny pair
(float32, triton attention, ``--mem-fraction-static 0.3``, 2 draft steps). With both it
serves that target + EAGLE-3 draft pair from disk instead: each must be a directory with
a ``config.json`` (refused with the reason otherwise, exit 2), ``--dtype`` defaults to
``auto``, SGLang picks the attention backend and the memory fraction, the draft runs 3
steps (topk 1, 4 draft tokens: the patch supports topk 1 only) and the context length is
the target's ``max_position_embeddings`` capped at ``CONTEXT_CAP``; no time budget unless
``--budget-s`` is given (gpu_budget's estimates are the tiny pair's).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import gpu_budget

MAX_NEW = 250  # the rig's pair: trained to ~384 positions, prompts of 24-34 tokens + 250
MAX_NEW_PAIR = 1024  # a real pair: the references' length cap
CONTEXT_CAP = 32768  # a real pair's default --context-length: its own, at most this
RIG_DEFAULTS = {"dtype": "float32", "attention_backend": "triton", "mem_fraction_static": 0.3, "spec_steps": 2}
PAIR_DEFAULTS = {"dtype": "auto", "attention_backend": None, "mem_fraction_static": None, "spec_steps": 3}


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels must be integers, got {text!r}") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError(f"levels must be >= 1, got {text!r}")
    return levels


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def model_dir_problem(flag: str, path: Path) -> str | None:
    """Why ``path`` cannot be served as ``flag``'s model, or None."""
    if not path.exists():
        return f"{flag} {path}: does not exist"
    if not path.is_dir():
        return f"{flag} {path}: not a directory (a model directory with config.json)"
    config = path / "config.json"
    if not config.is_file():
        return f"{flag} {path}: no config.json (not a Hugging Face model directory)"
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        return f"{flag} {config}: not readable as JSON ({exc})"
    return None


def pair_problem(model: Path | None, draft: Path | None) -> str | None:
    """Why ``--model``/``--draft-model`` are refused, or None (both given and valid, or neither)."""
    if (model is None) != (draft is None):
        given, missing = ("--model", "--draft-model") if draft is None else ("--draft-model", "--model")
        return f"{given} needs {missing}: a real pair is a target and its EAGLE-3 draft (or neither: the rig's pair)"
    if model is None or draft is None:
        return None
    return model_dir_problem("--model", model) or model_dir_problem("--draft-model", draft)


def context_of(model: Path) -> int | None:
    """The target's ``max_position_embeddings`` (None when its config has none)."""
    value = json.loads((model / "config.json").read_text()).get("max_position_embeddings")
    return value if isinstance(value, int) and value > 0 else None


def build_parser(description: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/gpu-check", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tp", type=int, default=None, help="tp of the multi-GPU part (default: 2 with two GPUs or more, else none)")
    p.add_argument("--model", type=Path, help="a real target model directory (with --draft-model; default: the rig's pair)")
    p.add_argument("--draft-model", type=Path, help="its EAGLE-3 draft model directory (with --model)")
    p.add_argument("--dtype", default=None, help="server --dtype (default float32 for the rig's pair, auto for a real pair)")
    p.add_argument("--context-length", type=int, default=None, help=f"a real pair: default its own, at most {CONTEXT_CAP}")
    p.add_argument("--speculative-num-steps", type=int, default=None, help="draft steps (default 2 rig, 3 real pair; topk 1)")
    p.add_argument("--mem-fraction-static", type=float, default=None, help="default 0.3 rig, SGLang's own for a real pair")
    p.add_argument("--flip-seconds", type=float, default=30.0, help="forced flips under load: seconds of flipping (default 30)")
    p.add_argument("--max-new", type=int, default=None, help=f"tokens per reference output (>= 100; default {MAX_NEW})")
    p.add_argument("--levels", type=_levels, default=[1, 4, 16])
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--measure", type=float, default=5.0)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1, help="sweeps per mode (medians)")
    p.add_argument(
        "--attention-backend",
        default=None,
        help="GPU attention backend (default triton for the rig's pair, whose head_dim 16 rules out FA3/FlashInfer; "
        "SGLang's choice for a real pair)",
    )
    p.add_argument("--lifetime", type=float, default=1800, help="watchdog per server, seconds")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="time budget, seconds (default 420 on cuda with the rig's pair: one device call < 8 min; 0 on cpu "
        "or with a real pair: none); "
        "what does not fit is reported SKIP (tests/real_sglang/rig/gpu_budget.py)",
    )
    p.add_argument("--skip", type=_names, default=[], help=f"comma-separated steps not to run: {', '.join(gpu_budget.STEPS)}")
    p.add_argument("--fault-deadline-s", type=float, default=None, help="a fault server's hard deadline (600 cpu, 300 cuda)")
    p.add_argument("--itl-requests", type=int, default=4, help="ITL under polling: requests per arm")
    p.add_argument("--itl-max-tokens", type=int, default=128)
    p.add_argument("--itl-rounds", type=int, default=2)
    p.add_argument("--itl-max-ratio", type=float, default=1.25, help="cuda: the console's polling, patched over plain")
    p.add_argument("--logs", type=Path, help="keep the server logs here")
    p.add_argument("--json", type=Path, help="write the results as JSON here")
    p.add_argument(
        "--bundle",
        type=Path,
        help="a bare image: install this built bundle (scripts/build-gpu-bundle) and run with it (gpu_bundle/run.py)",
    )
    p.add_argument("--dry-run", action="store_true", help="with --bundle: install and import everything, start no server")
    return p


def parse(argv: list[str], description: str | None = None) -> argparse.Namespace:
    """The options, every default resolved; a bad combination exits 2 with the reason."""
    p = build_parser(description)
    opts = p.parse_args(argv)
    if opts.dry_run and opts.bundle is None:
        p.error("--dry-run needs --bundle")
    why = pair_problem(opts.model, opts.draft_model)
    if why:
        p.error(why)
    opts.real_pair = opts.model is not None
    for key, value in (PAIR_DEFAULTS if opts.real_pair else RIG_DEFAULTS).items():
        if getattr(opts, key, None) is None:
            setattr(opts, key, value)
    if opts.speculative_num_steps is None:
        opts.speculative_num_steps = opts.spec_steps
    if opts.speculative_num_steps < 1:
        p.error(f"--speculative-num-steps must be >= 1, got {opts.speculative_num_steps}")
    cap = MAX_NEW_PAIR if opts.real_pair else MAX_NEW
    opts.max_new = MAX_NEW if opts.max_new is None else opts.max_new
    if not 100 <= opts.max_new <= cap:
        p.error(f"--max-new must be 100..{cap}, got {opts.max_new}")
    if opts.real_pair and opts.context_length is None:
        own = context_of(opts.model)
        opts.context_length = min(own, CONTEXT_CAP) if own else None
    if opts.context_length is not None and opts.context_length < 2 * opts.max_new:
        p.error(f"--context-length {opts.context_length} is shorter than twice --max-new ({opts.max_new})")
    unknown = sorted(set(opts.skip) - set(gpu_budget.STEPS))
    if unknown:
        p.error(f"--skip: unknown steps {unknown}")
    if opts.budget_s is None:
        # the estimates are the tiny pair's; a real pair: none unless given
        opts.budget_s = 420.0 if opts.device == "cuda" and not opts.real_pair else 0.0
    if opts.fault_deadline_s is None:
        opts.fault_deadline_s = 300.0 if opts.device == "cuda" else 600.0
    return opts
