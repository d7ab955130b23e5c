"""Rig servers by specification, one alive at a time (test rig only).

A CI machine has 2 cores and a few GB: each tiny server still costs ~3 GB (torch + SGLang
in 3 processes) and ~1 min to start, so a test asks ``OneAtATime.get(spec)`` for the
server it needs; a different spec stops the running one first. The real-SGLang tier has
one pool for the whole session (tests/real_sglang/conftest.py), shared by the modules
(each its own ``user`` and ``cache``), and orders the tests so that each server starts
once. A server handed to another user than the last one is first reset (``on_reuse``:
rig/reuse.py puts its runtime state back to the launch's, and checks it).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from server_control.host.ports import free_port

from . import crossover_models, deep_models, skip_draft_extend
from .build import ModelPair, Rig, ensure_models, omp_bind, server_args, server_env
from .server import PortTaken, RigServer, plain_launch_argv

PORT_ATTEMPTS = 3  # starts of one server whose port was taken before it bound it (server.PortTaken)

# float32 end to end (SGLang's dtype "auto" would run a float32 checkpoint in float16):
# Spec.dtype's default, the rig's pairs
COMMON_ARGS = ("--dtype", "float32")
# the automatic rule: target-only above 2 decode requests, back at <= 1, after 2 steps
PATCHED_ARGS = (
    "--speculative-disable-batch-threshold",
    "2",
    "--speculative-disable-hysteresis",
    "1",
    "--speculative-disable-min-dwell-steps",
    "2",
    "--decode-log-interval",
    "1",
)
# a KV pool for 40,000 tokens (test_sampling_exact.py's 2,000 requests decode as one
# batch) and xgrammar's JSON without free whitespace: the random pair's plain and patched
# servers of test_sampling_exact.py and test_switch_exact.py (one plain server for both)
RANDOM_KV = ("--max-total-tokens", "40000", "--constrained-json-disable-any-whitespace")


@dataclass(frozen=True)
class Spec:
    models: str  # "trained", "random" (build.MODEL_KINDS), "deep" or "crossover"
    patched: bool = True  # False: plain SGLang, target alone, no speculation
    overlap: bool = False  # SGLang's overlap scheduler (rig/overlap.py)
    tp: int = 1
    extra: tuple = ()
    paths: tuple[str, str] | None = None  # (target, draft) directories: a pair from disk, not the rig's
    dtype: str = "float32"
    steps: int = 2  # draft steps (topk 1, steps + 1 draft tokens)
    seeded: bool = False  # each request's sampling_seed drawn by (rig/seeded_sampling.py)
    # SGLang's own --speculative-adaptive ("default": DEFAULT_ADAPTIVE_CONFIG, or a config
    # file's path). Not patched: the peer (None: the target alone); patched: the patch's
    # threshold beside SGLang's controller, which picks the steps at or below N
    adaptive: str | None = None

    @property
    def name(self) -> str:
        parts = [self.models, "patched" if self.patched else "adaptive" if self.adaptive else "plain"]
        parts += ["adaptive"] if self.patched and self.adaptive else []
        # SGLang's adaptive with a config file is another server than with its default config
        parts += [Path(self.adaptive).stem] if self.adaptive not in (None, "default") else []
        parts += ["overlap"] if self.overlap else []
        parts += ["seeded"] if self.seeded else []
        parts += [f"tp{self.tp}"] if self.tp > 1 else []
        return "-".join(parts)


def models(rig: Rig, kind: str) -> ModelPair:
    """The rig's pair ``kind``: build.MODEL_KINDS, "deep" (deep_models.py) or "crossover"
    (crossover_models.py)."""
    if kind == deep_models.KIND:
        return deep_models.ensure(rig)
    if kind == crossover_models.KIND:
        return crossover_models.ensure(rig)
    return ensure_models(rig, kind)


def pair_of(rig: Rig, spec: Spec) -> ModelPair:
    """``spec``'s pair: its ``paths`` when set, else the rig's pair ``spec.models``."""
    if spec.paths is not None:
        return ModelPair(kind=spec.models, target=Path(spec.paths[0]), draft=Path(spec.paths[1]), facts={})
    return models(rig, spec.models)


def end_on_term() -> None:
    """SIGTERM and SIGHUP end this process as Ctrl-C does (KeyboardInterrupt), so the
    ``finally`` that stops its rig servers runs: a benchmark killed by ``kill`` or a closed
    terminal left four SIGSTOPped servers behind. A signal this process was started ignoring
    stays ignored, as Python leaves an ignored SIGINT: ``nohup python -m benchmarks.mode_cost``
    outlives its terminal, as ``nohup`` says. For scripts' ``main`` (not tests)."""
    import signal

    def interrupt(signum, _frame) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, interrupt)


def launch(rig: Rig, spec: Spec, log_dir: Path, lifetime_s: int, env_extra: dict | None = None) -> RigServer:
    """Start ``spec`` (not waiting for it); ``env_extra`` joins its environment."""
    port = free_port()
    pair = pair_of(rig, spec)
    dtype = ("--dtype", spec.dtype)
    env = server_env(rig, overlap=spec.overlap)
    env.update(env_extra or {})
    skip_file = log_dir / f"{spec.name}.skip-draft-extend"  # RigServer.skipping_draft_extend
    if spec.patched:
        env[skip_draft_extend.FILE_ENV] = str(skip_file)
    if spec.seeded:
        env["SPECCONSOLE_RIG_SEEDED_SAMPLING"] = "1"
    if spec.tp > 1:
        env["SGLANG_CPU_OMP_THREADS_BIND"] = omp_bind(spec.tp)
    config = [] if spec.adaptive in (None, "default") else ["--speculative-adaptive-config", str(spec.adaptive)]
    if spec.patched:
        adaptive = ["--speculative-adaptive", *config] if spec.adaptive else []
        args = server_args(
            rig,
            port,
            steps=spec.steps,
            models=pair,
            overlap=spec.overlap,
            tp=spec.tp,
            extra=[*dtype, *PATCHED_ARGS, *adaptive, *spec.extra],
        )
        argv = [sys.executable, "-m", "server_control.sglang_patch.serve", *args]
    elif spec.adaptive:
        args = server_args(
            rig, port, steps=spec.steps, models=pair, tp=spec.tp, extra=[*dtype, "--speculative-adaptive", *config, *spec.extra]
        )
        argv = plain_launch_argv(args)
    else:
        argv = plain_launch_argv(server_args(rig, port, models=pair, speculative=False, tp=spec.tp, extra=[*dtype, *spec.extra]))
    server = RigServer.start(argv, env, log_dir / f"{spec.name}.log", port, lifetime_s=lifetime_s)
    if spec.patched:
        server.skip_file = skip_file
    return server


class OneAtATime:
    def __init__(self, rig: Rig, log_dir: Path, lifetime_s: int, launcher=launch, on_reuse=None) -> None:
        self.rig, self.log_dir, self.lifetime_s = rig, log_dir, lifetime_s
        self.launcher = launcher  # (rig, spec, log_dir, lifetime_s) -> RigServer
        self.on_reuse = on_reuse  # (server, spec) -> None: called before another user gets it
        self.spec: Spec | None = None
        self.server: RigServer | None = None
        self.ready_s: dict[str, float] = {}
        self.left: list[int] = []  # pids a stop could not end (asserted empty at the end)
        self.user = "-"  # who asks now (the tier's ``pool`` fixture: the test module)
        self.served: str | None = None  # the user the running server last served
        self.reused: list[tuple[str, str]] = []  # (spec name, user): a running server handed over
        self._caches: dict[str, dict] = {}

    @property
    def cache(self) -> dict:
        """Results the current user's tests share (reference outputs, figures)."""
        return self._caches.setdefault(self.user, {})

    def get(self, spec: Spec) -> RigServer:
        if spec != self.spec:
            self.close()
            pair_of(self.rig, spec)  # trained on first use: not start-up time
            t0 = time.monotonic()
            self.spec = spec
            for attempt in range(1, PORT_ATTEMPTS + 1):
                self.server = self.launcher(self.rig, spec, self.log_dir, self.lifetime_s)  # new ports each time
                try:
                    self.server.wait_ready(timeout_s=900)
                    break
                except PortTaken:
                    self.left += self.server.stop()
                    self.server = None
                    if attempt == PORT_ATTEMPTS:
                        self.spec = None
                        raise
            self.ready_s[spec.name] = time.monotonic() - t0
        elif self.served != self.user:
            assert self.server is not None
            if self.on_reuse is not None:
                self.on_reuse(self.server, spec)
            self.reused.append((spec.name, self.user))
        self.served = self.user
        assert self.server is not None
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.left += self.server.stop()
        self.spec = self.server = None
        self.served = None
