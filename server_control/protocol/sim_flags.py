"""The simulator's ``--sim-*`` flags: the one table that the simulator's parser
(server_control/sim/args.py) and the profile schema's ``[sim]`` keys
(server_control/config/schema.py) both read, and the value types only these flags take
(the others: protocol/arg_types.py). Standard library only."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server_control.protocol.arg_types import int_at_least, positive, rate, seconds
from server_control.protocol.explore import validate_share
from server_control.protocol.sim_phases import Phase, PhaseError, parse_phases


@dataclass(frozen=True)
class Traffic:
    kind: str  # idle | steady | ramp | wave | phases
    peak: int = 0  # steady: concurrency; ramp/wave: highest concurrency (0 = from threshold)
    period_s: float = 60.0
    phases: tuple[Phase, ...] = ()  # phases: server_control/protocol/sim_phases.py


def recovery_steps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid step count {text!r}") from None
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"cold recovery must be 0..100000 speculative steps, got {text!r}")
    return value


def kv_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid milliseconds {text!r}") from None
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"KV cost must be 0..100 ms per 1000 tokens, got {text!r}")
    return value


def explore_share(text: str) -> float:
    try:
        return validate_share(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tune_bounds(text: str) -> tuple[int, int]:
    """``LO-HI`` auto-tune bounds, 1 <= LO <= HI <= 4096."""
    lo_text, sep, hi_text = text.strip().partition("-")
    try:
        lo, hi = int(lo_text), int(hi_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"auto-tune bounds must be LO-HI integers, got {text!r}") from None
    if not sep or not 1 <= lo <= hi <= 4096:
        raise argparse.ArgumentTypeError(f"auto-tune bounds must be LO-HI with 1 <= LO <= HI <= 4096, got {text!r}")
    return lo, hi


def parse_traffic(text: str) -> Traffic:
    """idle | steady:C | ramp[:MAX[:PERIOD_S]] | wave[:MAX[:PERIOD_S]]"""
    parts = text.strip().lower().split(":")
    kind = parts[0]
    usage = "expected idle, steady:C, ramp[:MAX[:PERIOD_S]], wave[:MAX[:PERIOD_S]] or phases:PHASE/..."
    if kind == "phases":
        try:
            return Traffic("phases", phases=parse_phases(text.strip().partition(":")[2]))
        except PhaseError as exc:
            raise argparse.ArgumentTypeError(f"bad traffic {text!r}: {exc}") from None
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
    SimFlag(
        "traffic",
        parse_traffic,
        Traffic("idle"),
        "idle | steady:C | ramp[:MAX[:PERIOD_S]] | wave[:MAX[:PERIOD_S]] | phases:s=S,c=LO-HI,ctx=T,p=P/...",
    ),
    SimFlag(
        "explore_share",
        explore_share,
        None,
        "share of decode steps (0..0.1) that run the other mode near the threshold, so both cost curves exist there "
        "(0 = off; default 0.05 with --sim-auto-tune, else 0)",
    ),
    SimFlag(
        "auto_tune",
        tune_bounds,
        None,
        "LO-HI: the threshold follows the measured crossover within "
        "LO..HI (moves logged with their evidence); an operator's threshold turns it off",
    ),
    SimFlag(
        "kv_cost", kv_ms, 0.0, "ms per request per decode step per 1000 context tokens (KV reads; 0 = the short-context model)"
    ),
    SimFlag(
        "cold_recovery",
        recovery_steps,
        0,
        "speculative steps a request accepts no draft after it lived through a cold target-only step "
        "(cold_draft_above; 0: the patched server catches the draft up before resuming; 12: the CPU rig's "
        "trained pair without the catch-up, docs/cpu-rig.md)",
    ),
    SimFlag("seed", int, 0),
    SimFlag("time_scale", positive, 1.0, "simulated seconds per wall-clock second (tests use > 1)"),
    SimFlag("load_time", seconds, 2.0, "simulated seconds of weight loading and graph capture"),
    SimFlag("slow_start", seconds, 0.0, "extra simulated seconds of warm-up while /health answers 503"),
    SimFlag("crash_after", seconds, None, "scheduler raises after S simulated seconds of serving"),
    SimFlag("health_fail_after", seconds, None, "/health and /health_generate fail after S simulated seconds of serving"),
    SimFlag("health_fail_mode", str, "503", choices=("503", "hang")),
    SimFlag("http_5xx_rate", rate, 0.0, "share of generation requests answered with HTTP 500"),
    SimFlag("max_lifetime", seconds, 0.0, "wall-clock seconds after which every process exits (0 = no limit)"),
    SimFlag(
        "fail_build_rank",
        int_at_least(0),
        None,
        "TP rank whose steps=0 state fails to build at start-up: every rank turns the switch "
        "off together with one NOT active line naming it, as the SGLang patch does",
    ),
    SimFlag("light", bool, False, "TP ranks inside the main process (one process per server; for big fleets)", switch=True),
    SimFlag(
        "bind_late",
        bool,
        False,
        "bind the HTTP port where SGLang does, once the model has loaded: a port taken meanwhile is logged "
        "as uvicorn logs it, and the server lingers without HTTP, as SGLang 0.5.23 does",
        switch=True,
    ),
)
SIM_FLAG_BY_KEY = {f.key: f for f in SIM_FLAGS}
