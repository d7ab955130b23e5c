"""The simulator's command line: the `sglang.launch_server` flags the profiles pass, plus
simulator-only `--sim-*` flags. Unknown flags are accepted with one warning line."""

from __future__ import annotations

import argparse
from typing import Any

from server_control.protocol import runtime_settings
from server_control.protocol.arg_types import int_at_least, port_number, validated
from server_control.protocol.keys import take_key_flags
from server_control.protocol.sglang_version import SGLANG_VERSION
from server_control.protocol.sim_flags import SIM_FLAGS
from server_control.protocol.tuner import start_share

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


FAIL_BUILD_WHY = "could not build the target-only (steps=0) runtime state: RuntimeError('simulated by --sim-fail-build-rank')"


def explore_share(a: argparse.Namespace) -> float:
    """The exploration share the main process and every rank start with (the same)."""
    return start_share(a.sim_explore_share, a.sim_auto_tune is not None)


def off_reason(a: argparse.Namespace) -> str | None:
    """Why the switch is off on every rank from the start (``--sim-fail-build-rank``), in the
    SGLang patch's words (``rank_verdict.judge``), or None."""
    failed = a.sim_fail_build_rank
    if failed is None or not a.speculative_algorithm:
        return None
    from server_control.protocol import rank_verdict

    settings = [getattr(a, s.key) for s in runtime_settings.SETTINGS]
    facts = [
        {
            "active": r != failed,
            "reason": FAIL_BUILD_WHY if r == failed else None,
            "settings": settings,
            "sglang": SGLANG_VERSION,
            "patch": "sim",
        }
        for r in range(a.tp_size)
    ]
    return rank_verdict.judge(facts, 0).reason


PROG = "python -m server_control.sim"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Simulated SGLang 0.5.23 server (EAGLE-3 with dynamic speculation disable).",
    )
    a = p.add_argument
    a("--model-path", "--model", dest="model_path", required=True)
    a("--tokenizer-path", default=None)
    a("--served-model-name", default=None)
    a("--tp-size", "--tensor-parallel-size", "--tp", dest="tp_size", type=int_at_least(1), default=1)
    a("--dp-size", "--data-parallel-size", "--dp", dest="dp_size", type=int_at_least(1), default=1)
    a("--speculative-algorithm", choices=SPEC_ALGORITHMS, default=None)
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    a("--speculative-num-steps", type=int_at_least(1), default=None)
    a("--speculative-eagle-topk", type=int_at_least(1), default=None)
    a("--speculative-num-draft-tokens", type=int_at_least(1), default=None)
    for setting in runtime_settings.SETTINGS:
        a(setting.flag, type=validated(setting.validate), default=setting.default, help=setting.help)
    a("--host", default="127.0.0.1")
    a("--port", type=port_number, default=30000)
    a("--enable-metrics", action="store_true")
    a("--api-key", default=None)
    a("--admin-api-key", default=None)
    a("--decode-log-interval", type=int_at_least(1), default=40)
    a("--log-level", choices=("debug", "info", "warning", "error", "critical"), default="info")
    a("--max-running-requests", type=int_at_least(1), default=None)
    a("--max-total-tokens", type=int_at_least(1), default=None)
    a("--context-length", type=int_at_least(1), default=None)
    a("--mem-fraction-static", type=float, default=None)
    a("--trust-remote-code", action="store_true")
    a("--dtype", default="auto")
    a("--device", default="cuda")
    s = p.add_argument_group("simulator-only")
    for f in SIM_FLAGS:
        if f.switch:
            s.add_argument(f.flag, action="store_true", help=f.help or None)
        else:
            s.add_argument(f.flag, type=f.parse, default=f.default, choices=f.choices, help=f.help or None)
    return p


def parse_args(argv: list[str], prog: str = PROG) -> tuple[argparse.Namespace, list[str]]:
    """Parse; returns (args, unknown flags). Invalid values exit with code 2. ``prog``: the
    name usage and error lines give (`specconsole sim` when run through the CLI)."""
    parser = build_parser(prog)
    args, unknown = parser.parse_known_args(take_key_flags(argv))
    if args.sim_fail_build_rank is not None and args.sim_fail_build_rank >= args.tp_size:
        parser.error(f"--sim-fail-build-rank {args.sim_fail_build_rank} is not a TP rank (--tp-size {args.tp_size})")
    if args.speculative_algorithm:
        if args.speculative_num_steps is None:
            args.speculative_num_steps = 3
        if args.speculative_eagle_topk is None:
            args.speculative_eagle_topk = 1
        if args.speculative_num_draft_tokens is None:
            args.speculative_num_draft_tokens = args.speculative_num_steps + 1
    if args.max_running_requests is None:
        args.max_running_requests = 512
    if args.max_total_tokens is None:
        args.max_total_tokens = 262144
    if args.context_length is None:
        args.context_length = 8192
    if args.tokenizer_path is None:
        args.tokenizer_path = args.model_path
    return args, unknown


SECRET_FIELDS = ("api_key", "admin_api_key")


def flat_server_args(args: argparse.Namespace) -> dict[str, Any]:
    """The resolved server args as /server_info shows them (secrets hidden, no sim flags)."""
    out = {}
    for key, value in vars(args).items():
        if key.startswith("sim_"):
            continue
        if key in SECRET_FIELDS:
            value = None if value is None else "<redacted>"
        out[key] = value
    out["served_model_name"] = args.served_model_name or args.model_path
    return out


def server_args_repr(args: argparse.Namespace) -> str:
    fields = []
    for key, value in vars(args).items():
        if key.startswith("sim_"):
            continue
        if key in SECRET_FIELDS and value is not None:
            value = "<redacted>"
        fields.append(f"{key}={value!r}")
    return "ServerArgs(" + ", ".join(fields) + ")"
