"""The simulator's command line: the `sglang.launch_server` flags the profiles pass, plus
simulator-only `--sim-*` flags. Unknown flags are accepted with one warning line."""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from server_control.protocol import decision
from server_control.protocol.keys import take_key_flags

T = TypeVar("T")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
VERSION = "0.5.23"


def _int_at_least(lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {value}")
        return value
    parse.__name__ = f"int>={lo}"
    return parse


def _validated(fn: Callable[[str], T]) -> Callable[[str], T]:
    def parse(text: str) -> T:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = fn.__name__
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"seconds must be a finite number >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 (argparse type; also `specconsole bench`'s)."""
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _scale(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"time scale must be > 0, got {text!r}")
    return value


def _rate(text: str) -> float:
    value = _seconds(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"rate must be between 0 and 1, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _int_at_least(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


@dataclass(frozen=True)
class Traffic:
    kind: str          # idle | steady | ramp | wave
    peak: int = 0      # steady: concurrency; ramp/wave: highest concurrency (0 = from threshold)
    period_s: float = 60.0


def parse_traffic(text: str) -> Traffic:
    """idle | steady:C | ramp[:MAX[:PERIOD_S]] | wave[:MAX[:PERIOD_S]]"""
    parts = text.strip().lower().split(":")
    kind = parts[0]
    usage = "expected idle, steady:C, ramp[:MAX[:PERIOD_S]] or wave[:MAX[:PERIOD_S]]"
    if kind not in ("idle", "steady", "ramp", "wave"):
        raise argparse.ArgumentTypeError(f"unknown traffic {text!r}: {usage}")
    try:
        nums = [float(p) for p in parts[1:]]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad number in traffic {text!r}: {usage}") from None
    if kind == "idle":
        if nums:
            raise argparse.ArgumentTypeError(f"idle takes no parameters: {text!r}")
        return Traffic("idle")
    if kind == "steady":
        if len(nums) != 1 or nums[0] < 1 or not nums[0].is_integer() or nums[0] > 4096:
            raise argparse.ArgumentTypeError(f"steady needs a concurrency 1..4096: {text!r}")
        return Traffic("steady", int(nums[0]))
    if len(nums) > 2 or (nums and (nums[0] < 1 or not nums[0].is_integer() or nums[0] > 4096)):
        raise argparse.ArgumentTypeError(f"bad traffic {text!r}: {usage}")
    if len(nums) == 2 and not (nums[1] > 0 and math.isfinite(nums[1])):
        raise argparse.ArgumentTypeError(f"traffic period must be > 0 seconds: {text!r}")
    peak = int(nums[0]) if nums else 0
    period = nums[1] if len(nums) == 2 else 60.0
    return Traffic(kind, peak, period)


@dataclass(frozen=True)
class SimFlag:
    """A simulator-only flag ``--sim-<key>``; profiles set it as ``[sim] key = value``."""

    key: str
    parse: Callable[[str], Any]
    default: Any
    help: str = ""
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a bare flag: [sim] key = true passes it, false leaves it out

    @property
    def flag(self) -> str:
        return "--sim-" + self.key.replace("_", "-")

    def problem(self, value: Any) -> str | None:
        """What the parser would refuse in ``--sim-<key> <value>`` (a profile's value), or None."""
        if self.switch:
            return None if isinstance(value, bool) else f"{self.flag} is a switch: true or false, got {value!r}"
        if isinstance(value, bool):
            return f"{self.flag} takes a value, got {value!r}"
        try:
            parsed = self.parse(str(value))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            return f"invalid value {value!r} for {self.flag}: {exc}"
        if self.choices is not None and parsed not in self.choices:
            return f"must be one of {', '.join(self.choices)}, got {value!r}"
        return None


# The one table of --sim-* flags: the parser below and the profile schema's [sim] keys.
SIM_FLAGS: tuple[SimFlag, ...] = (
    SimFlag("traffic", parse_traffic, Traffic("idle"), "idle | steady:C | ramp[:MAX[:PERIOD_S]] | wave[:MAX[:PERIOD_S]]"),
    SimFlag("seed", int, 0),
    SimFlag("time_scale", _scale, 1.0, "simulated seconds per wall-clock second (tests use > 1)"),
    SimFlag("load_time", _seconds, 2.0, "simulated seconds of weight loading and graph capture"),
    SimFlag("slow_start", _seconds, 0.0, "extra simulated seconds of warm-up while /health answers 503"),
    SimFlag("crash_after", _seconds, None, "scheduler raises after S simulated seconds of serving"),
    SimFlag("health_fail_after", _seconds, None,
            "/health and /health_generate fail after S simulated seconds of serving"),
    SimFlag("health_fail_mode", str, "503", choices=("503", "hang")),
    SimFlag("http_5xx_rate", _rate, 0.0, "share of generation requests answered with HTTP 500"),
    SimFlag("max_lifetime", _seconds, 0.0, "wall-clock seconds after which every process exits (0 = no limit)"),
    SimFlag("fail_build_rank", _int_at_least(0), None,
            "TP rank whose steps=0 state fails to build at start-up: every rank turns the switch "
            "off together with one NOT active line naming it, as the SGLang patch does"),
    SimFlag("light", bool, False, "TP ranks inside the main process (one process per server; for big fleets)",
            switch=True),
)
SIM_FLAG_BY_KEY = {f.key: f for f in SIM_FLAGS}


FAIL_BUILD_WHY = ("could not build the target-only (steps=0) runtime state: "
                  "RuntimeError('simulated by --sim-fail-build-rank')")


def off_reason(a: argparse.Namespace) -> str | None:
    """Why the switch is off on every rank from the start (``--sim-fail-build-rank``), in the
    SGLang patch's words (``tp_ranks.judge``), or None."""
    failed = a.sim_fail_build_rank
    if failed is None or not a.speculative_algorithm:
        return None
    from server_control.protocol import tp_ranks
    settings = [a.speculative_disable_batch_threshold, a.speculative_disable_hysteresis,
                a.speculative_disable_min_dwell_steps, a.speculative_disable_force_mode]
    facts = [{"active": r != failed, "reason": FAIL_BUILD_WHY if r == failed else None,
              "settings": settings,
              "sglang": VERSION, "patch": "sim"} for r in range(a.tp_size)]
    return tp_ranks.judge(facts, 0).reason


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
    a("--tp-size", "--tensor-parallel-size", "--tp", dest="tp_size", type=_int_at_least(1), default=1)
    a("--dp-size", "--data-parallel-size", "--dp", dest="dp_size", type=_int_at_least(1), default=1)
    a("--speculative-algorithm", choices=SPEC_ALGORITHMS, default=None)
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    a("--speculative-num-steps", type=_int_at_least(1), default=None)
    a("--speculative-eagle-topk", type=_int_at_least(1), default=None)
    a("--speculative-num-draft-tokens", type=_int_at_least(1), default=None)
    a("--speculative-disable-batch-threshold", type=_validated(decision.validate_threshold), default=0)
    a("--speculative-disable-hysteresis", type=_validated(decision.validate_hysteresis),
      default=decision.DEFAULT_HYSTERESIS)
    a("--speculative-disable-min-dwell-steps", type=_validated(decision.validate_dwell),
      default=decision.DEFAULT_MIN_DWELL_STEPS)
    a("--speculative-disable-force-mode", type=_validated(decision.validate_force), default=decision.AUTO)
    a("--host", default="127.0.0.1")
    a("--port", type=_port, default=30000)
    a("--enable-metrics", action="store_true")
    a("--api-key", default=None)
    a("--admin-api-key", default=None)
    a("--decode-log-interval", type=_int_at_least(1), default=40)
    a("--log-level", choices=("debug", "info", "warning", "error", "critical"), default="info")
    a("--max-running-requests", type=_int_at_least(1), default=None)
    a("--max-total-tokens", type=_int_at_least(1), default=None)
    a("--context-length", type=_int_at_least(1), default=None)
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
        parser.error(f"--sim-fail-build-rank {args.sim_fail_build_rank} is not a TP rank "
                     f"(--tp-size {args.tp_size})")
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
