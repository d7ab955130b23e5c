"""``scripts/gpu-check``: the patched server on NVIDIA GPUs, production path (test rig).

For a machine with one or more NVIDIA GPUs and the sglang extra installed
(``pip install -e '.[sglang]'``). No downloads: it trains the rig's tiny target + EAGLE-3
draft there (tests/real_sglang/rig/trained_models.py), then runs, one server at a time:
  plain SGLang (target alone)     reference outputs, plain tok/s
  patched, tp 1, CUDA graphs + overlap scheduler:
                                  start-up (init line, steps=0 state: time and memory),
                                  switch both ways, runtime threshold, warm draft after
                                  target-only, forced flips every 3 steps under load
                                  (token-exact), automatic switches (token-exact),
                                  tok/s per mode (benchmarks/mode_cost.py)
  patched, tp 2 (two GPUs or more): start-up, switch both ways, runtime threshold on
                                  every rank
prints one summary and exits 1 on any failure (2: bad arguments).

``--device cpu`` runs the same checks on the CPU rig (CPU stand-ins, overlap scheduler via
rig/overlap.py, no CUDA graphs): what CI runs, so every part but the GPU is tested.

``--model DIR --draft-model DIR`` serve a real target + EAGLE-3 draft pair from disk instead
of the rig's (gpu_check_args.py: the options and their defaults; gpu_pair.py: its prompts,
from its own tokenizer, and the expectations that change with it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from . import gpu_budget, gpu_check_args
from . import gpu_checks as gc
from . import gpu_checks_faults as gf
from . import gpu_checks_memory as gm
from . import gpu_checks_polling as gw
from . import gpu_checks_stress as gs
from . import gpu_pair as gpair
from . import gpu_phases as gp
from .build import REPO_ROOT, ensure_models, ensure_rig
from .pool import PATCHED_ARGS, OneAtATime, Spec, launch, pair_of
from .server import RigServer

MAX_NEW = gpu_check_args.MAX_NEW


def preflight(device: str) -> tuple[str, dict]:
    """sglang 0.5.23 importable; on cuda also NVML's GPUs and torch's CUDA. Every problem
    found is named (not only the first), with the facts that were read."""
    facts, problems = [], []
    try:
        import sglang

        facts.append(f"sglang {sglang.__version__}")
        if sglang.__version__ != "0.5.23":
            problems.append(f"sglang {sglang.__version__}: the patch needs 0.5.23")
    except ImportError as exc:
        problems.append(f"sglang not importable ({exc}): pip install -e '.[sglang]'")
    gpus = []
    if device == "cuda":
        from server_control.telemetry.nvml import NvmlSampler

        sampler = NvmlSampler()
        if sampler.init():
            gpus = list(sampler.snapshot().devices)
            facts.append(f"{len(gpus)} GPU(s): " + ", ".join(f"{g.name} {g.mem_total_mb:.0f} MiB" for g in gpus))
        else:
            problems.append(f"NVML: {sampler.snapshot().reason}")
        try:
            import torch

            facts.append(f"torch {torch.__version__}, CUDA {'available' if torch.cuda.is_available() else 'NOT available'}")
            if not torch.cuda.is_available():
                problems.append("torch sees no CUDA device")
        except ImportError as exc:
            problems.append(f"torch not importable: {exc}")
        if not gpus:
            problems.append("no GPU")
    else:
        facts.append("CPU rehearsal (no GPU used)")
    assert not problems, "; ".join(problems) + " | found: " + "; ".join(facts)
    return "; ".join(facts), {"gpus": len(gpus)}


def cuda_launch(
    rig, spec: Spec, log_dir: Path, lifetime_s: int, env_extra: dict | None = None, *, opts: argparse.Namespace
) -> RigServer:
    """A server on the GPU(s): CUDA graphs and the overlap scheduler on (SGLang's defaults).
    ``env_extra`` joins its environment; with the rig's faults (``SPECCONSOLE_RIG_TP_FAULTS``)
    ``tp_faults_preload`` is added to the bootstrap's preload so every process installs them."""
    from server_control.host.ports import free_port

    port = free_port()
    args = cuda_args(pair_of(rig, spec), spec, port, opts)
    module = "server_control.sglang_patch.serve" if spec.patched else "sglang.launch_server"
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p),
    )
    env.update(env_extra or {})
    if env.get("SPECCONSOLE_RIG_TP_FAULTS"):
        preload = [n for n in env.get("SPECCONSOLE_SGLANG_PRELOAD", "").split(",") if n]
        env["SPECCONSOLE_SGLANG_PRELOAD"] = ",".join([*preload, "tests.real_sglang.rig.tp_faults_preload"])
    return RigServer.start([sys.executable, "-m", module, *args], env, log_dir / f"{spec.name}.log", port, lifetime_s=lifetime_s)


def cuda_args(pair, spec: Spec, port: int, opts: argparse.Namespace) -> list[str]:
    """launch_server's arguments for ``spec`` on the GPU(s): the rig's pair in float32 with
    triton attention and 0.3 of the memory, or a real pair with its dtype (auto) and
    SGLang's own attention backend and memory fraction (``gpu_check_args``)."""
    args = [
        *("--model-path", str(pair.target), "--tp-size", str(spec.tp), "--host", "127.0.0.1", "--port", str(port)),
        *(("--attention-backend", opts.attention_backend) if opts.attention_backend else ()),
        *(("--mem-fraction-static", str(opts.mem_fraction_static)) if opts.mem_fraction_static else ()),
        *("--cuda-graph-max-bs-decode", "32", "--dtype", spec.dtype),
    ]
    if spec.patched:
        args += [
            *("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(pair.draft)),
            *("--speculative-num-steps", str(spec.steps), "--speculative-eagle-topk", "1"),
            *("--speculative-num-draft-tokens", str(spec.steps + 1)),
            *PATCHED_ARGS,
        ]
    return [*args, *spec.extra]


def _server(step, key: str, pool: OneAtATime, spec: Spec) -> RigServer | None:
    ok = step(key, f"start {spec.name}", lambda: (pool.get(spec).url, {}))
    return pool.server if ok else None


def _plain_tok_s(mode_cost, url: str, pool: OneAtATime, opts) -> tuple[str, dict]:
    pool.cache["plain"] = mode_cost.measure_plain(url, opts)
    rows = pool.cache["plain"]["per_mode"][mode_cost.PLAIN]
    return ", ".join(f"c={r['concurrency']}: {r['tok_s']:.0f}" for r in rows) + " tok/s", {}


def _nothing_left(pool: OneAtATime, kept: str | None = None) -> tuple[str, dict]:
    assert pool.left == [], f"processes left: {pool.left}"
    if kept is not None:  # a caller's pool (the CPU test's shared servers): its server stays
        return f"every process group it stopped ended; {kept} left running for the pool's next user", {}
    return "every server's process group ended", {}


def _stepper(checks: gc.Checklist, budget: gpu_budget.Budget, skip: set[str]):
    """``step(key, name, fn, ...)``: run the check ``name`` unless the budget or --skip
    leaves out ``key`` (gpu_budget.STEPS); then it is reported SKIP with why. A
    priority-1 step the budget leaves out is a failure (the run would prove nothing)."""

    def step(key: str, name: str, fn, *args, **kwargs) -> bool:
        why = f"skipped by --skip {key!r}" if key in skip else budget.allows(key)
        if why is not None and key not in skip and gpu_budget.STEPS.get(key, (9, 0))[0] == 1:
            checks.run(name, _too_little_time, why)
            return False
        if why is not None:
            checks.skip_for_time(name, why)
            return False
        return checks.run(name, fn, *args, **kwargs)

    return step


def _too_little_time(why: str) -> tuple[str, dict]:
    raise AssertionError(f"a step every run needs does not fit --budget-s: {why}")


def run_checks(opts: argparse.Namespace, log_dir: Path, shared: OneAtATime | None = None) -> gc.Checklist:
    """The checks; ``shared``: a caller's pool (tests/real_sglang/test_gpu_check_cpu.py: the
    tier's servers, whose next user gets the last one), else one of its own, closed at the end."""
    from benchmarks import mode_cost

    checks, cuda = gc.Checklist(), opts.device == "cuda"
    order = [k for k in gpu_budget.STEPS if opts.tp > 1 or k != "tp"]
    est = gpu_budget.estimates(opts.flip_seconds, opts.levels, opts.warmup, opts.measure, opts.repeat)
    if opts.tp > 1:  # the stuck ranks' build watch ends them within seconds (build_outcome.py): a margin
        est["a rank fails inside a capture"] += 15
    budget = gpu_budget.Budget(opts.budget_s, est, order)
    step = _stepper(checks, budget, set(opts.skip))
    if not checks.run("preflight", preflight, opts.device):
        return checks
    rig = ensure_rig()
    work = _prepare(checks, rig, opts)
    if work is None:
        return checks
    spec_of = partial(_spec, opts)
    launcher = partial(cuda_launch, opts=opts) if cuda else launch
    pool = shared if shared is not None else OneAtATime(rig, log_dir, lifetime_s=int(opts.lifetime), launcher=launcher)
    prompts, floor = work.prompts, work.accept_floor
    parked: list[RigServer] = []
    try:
        plain = _server(step, "start trained-plain", pool, spec_of(patched=False))
        if plain is None:
            return checks
        ref = gc.sw.generate_ids(plain, [*prompts, work.probe], opts.max_new)
        step("tok/s plain", "tok/s plain", _plain_tok_s, mode_cost, plain.url, pool, opts)
        itl = budget.allows("ITL under polling") is None and "ITL under polling" not in opts.skip
        if itl:  # kept (SIGSTOPped) for the interleaved ITL check
            parked.append(gp.park(pool))
        spec = spec_of(overlap=not cuda)
        server = _server(step, "start patched", pool, spec)
        if server is not None:  # the phases below start servers of their own
            _patched_checks(step, pool, server, spec, (work, ref), parked, opts, mode_cost)
        while parked:  # its memory back before the next servers
            gp.unpark(pool, parked.pop())
        fault_spec = spec_of(overlap=not cuda, tp=opts.tp)
        for key, fault in (("a rank fails inside a capture", "capture"), ("a rank fails before the build", "before")):
            name = f"{key} (tp {opts.tp})"
            kw = {**_fault_kw(opts, cuda), "floor": floor}
            step(key, name, gf.fault_server, pool, launcher, fault_spec, fault, prompts, ref[:-1], **kw)
        step("adaptive on", "adaptive on", gp.adaptive_on, pool, spec_of(overlap=not cuda), prompts, log_dir, cuda, floor)
        if opts.tp > 1 and budget.allows("tp") is None and "tp" not in opts.skip:
            _tp_checks(checks.run, pool, spec_of(overlap=not cuda, tp=opts.tp), prompts, cuda, floor)
        elif opts.tp > 1:
            step("tp", f"tp {opts.tp}", lambda: ("", {}))
    finally:
        for s in parked:
            gp.unpark(pool, s)
        if shared is None:
            pool.close()
        checks.run("no process left", _nothing_left, pool, None if pool.spec is None else pool.spec.name)
    return checks


def _prepare(checks: gc.Checklist, rig, opts: argparse.Namespace) -> gpair.Workload | None:
    """The pair's prompts and expectations (None: its step failed). The rig's pair is
    trained here on first use; a real pair's prompts come from its target's tokenizer."""
    if not opts.real_pair:
        if not checks.run("build the rig's trained models", lambda: ("trained here", ensure_models(rig, "trained").facts)):
            return None
        return gpair.rig_workload()
    found: list[gpair.Workload] = []

    def load() -> tuple[str, dict]:
        found.append(gpair.pair_workload(opts.model, opts.context_length))
        detail, figures = gpair.describe(found[0])
        return f"{opts.model} + {opts.draft_model}, {opts.dtype}, context {opts.context_length}: {detail}", figures

    return found[0] if checks.run("the pair's prompts (its own tokenizer)", load) else None


def _spec(opts: argparse.Namespace, **kw) -> Spec:
    """A server of the run's pair: the rig's trained one, or ``--model``/``--draft-model``."""
    if not opts.real_pair:
        return Spec("trained", dtype=opts.dtype, steps=opts.speculative_num_steps, **kw)
    extra = ("--context-length", str(opts.context_length)) if opts.context_length else ()
    paths = (str(opts.model), str(opts.draft_model))
    return Spec("pair", paths=paths, dtype=opts.dtype, steps=opts.speculative_num_steps, extra=extra, **kw)


def _fault_kw(opts, cuda: bool) -> dict:
    return {"deadline_s": opts.fault_deadline_s, "cuda": cuda}


def _patched_checks(step, pool, server, spec, inputs, parked, opts, mode_cost) -> None:
    """The checks on the patched tp-1 server, most valuable first (gpu_budget.STEPS)."""
    (work, ref), cuda = inputs, opts.device == "cuda"
    prompts, floor = work.prompts, work.accept_floor
    step("start-up", "start-up", gc.startup, server, ready_s=pool.ready_s[spec.name], tp=1, cuda=cuda)
    step("switch both ways", "switch both ways", gc.switch_both_ways, server, prompts, tp=1, cuda=cuda, floor=floor)
    step("graph / eager per bucket", "graph / eager per bucket", gm.forwards_per_bucket, server, prompts, cuda=cuda)
    step("sampled requests", "sampled requests", gc.sampled_requests, server, prompts, ref[0])
    step("steps=0 memory per rank", "steps=0 memory per rank", gm.memory_per_rank, server, cuda=cuda)
    step("target-only stress at max batch", "target-only stress at max batch", gs.stress_target_only, server, work, cuda=cuda)
    step("N warnings in the log", "N warnings in the log", gw.n_warnings, server, tp=1)
    step("runtime threshold", "runtime threshold", gc.runtime_threshold, server, prompts, 1)
    warm = gc.warm_draft if work.trained else gpair.warm_draft_vs_baseline
    step("warm draft after target-only", "warm draft after target-only", warm, server, work.probe, ref[-1])
    step("cold draft after target-only", "cold draft after target-only", gc.cold_draft, server, work.probe, ref[-1])
    if parked:
        step("ITL under polling", "ITL under polling", gw.itl_under_polling, parked[0], server, **_itl_kw(opts, cuda))
        gp.unpark(pool, parked.pop())
    step("automatic switches", "automatic switches", gc.automatic_waves, server, prompts, ref[:-1])
    step("forced flips under load", "forced flips under load", gc.flips_under_load, server, prompts, ref[:-1], opts.flip_seconds)
    if "plain" in pool.cache:
        step("tok/s per mode", "tok/s per mode", _mode_cost, mode_cost, server.url, pool, opts)
    else:
        step("tok/s per mode", "tok/s per mode", _no_plain)


def _no_plain() -> tuple[str, dict]:
    raise AssertionError("no plain tok/s to compare with (that check failed or was skipped)")


def _itl_kw(opts, cuda: bool) -> dict:
    return {
        "requests": opts.itl_requests,
        "max_tokens": opts.itl_max_tokens,
        "rounds": opts.itl_rounds,
        "cuda": cuda,
        "max_ratio": opts.itl_max_ratio,
    }


def _mode_cost(mode_cost, url: str, pool: OneAtATime, opts) -> tuple[str, dict]:
    patched = mode_cost.measure_patched(url, opts)
    both = {"per_mode": {**pool.cache["plain"]["per_mode"], **patched["per_mode"]}}
    summary = mode_cost.summarise(both, opts.levels, 2 * max(opts.levels))
    pool.cache["mode_cost"] = summary
    assert summary["errors"] == 0, f"{summary['errors']} failed requests"
    assert not summary["problems"], summary["problems"]
    assert all((r["tok_s"][k] or 0) > 0 for r in summary["rows"] for k in summary["arms"])
    return "\n" + mode_cost.render(summary), {}


def _tp_checks(run, pool, spec: Spec, prompts, cuda: bool, floor: float) -> None:
    ok = run(f"start {spec.name}", lambda: (pool.get(spec).url, {}))
    server = pool.server if ok else None
    if server is None:
        return
    run(f"start-up tp {spec.tp}", gc.startup, server, ready_s=pool.ready_s[spec.name], tp=spec.tp, cuda=cuda)
    run(f"switch both ways tp {spec.tp}", gc.switch_both_ways, server, prompts, tp=spec.tp, cuda=cuda, floor=floor)
    run(f"runtime threshold tp {spec.tp}", gc.runtime_threshold, server, prompts, spec.tp)
    run(f"steps=0 memory per rank tp {spec.tp}", gm.memory_per_rank, server, cuda=cuda)
    run(f"graph / eager per bucket tp {spec.tp}", gm.forwards_per_bucket, server, prompts, cuda=cuda)
    run(f"N warnings in the log tp {spec.tp}", gw.n_warnings, server, tp=spec.tp)


def parse(argv: list[str]) -> argparse.Namespace:
    return gpu_check_args.parse(argv, __doc__)


def main(argv: list[str] | None = None, shared: OneAtATime | None = None) -> int:
    """The script (``shared``: run_checks')."""
    argv = sys.argv[1:] if argv is None else argv
    opts = parse(argv)
    os.environ.setdefault(gpu_budget.T0_ENV, str(time.time()))  # the budget counts a bundle install
    if opts.bundle is not None and not os.environ.get("SPECCONSOLE_GPU_BUNDLE_READY"):
        from gpu_bundle import run as bundle_run

        if opts.dry_run:
            return bundle_run.dry_run(opts.bundle, opts.json)
        try:
            bundle_run.reexec(opts.bundle, argv)  # does not return
        except bundle_run.BundleError as exc:
            print(f"FAIL bundle: {exc}")
            return 1
    if opts.tp is None:
        opts.tp = _gpu_count() if opts.device == "cuda" else 1
        opts.tp = 2 if opts.tp >= 2 else 1
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        log_dir = opts.logs or Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        checks = run_checks(opts, log_dir, shared)
    print(checks.summary())
    if opts.json:
        opts.json.write_text(json.dumps([r.__dict__ for r in checks.results], indent=1))
    return 1 if checks.failed else 0


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - preflight reports why
        return 0


if __name__ == "__main__":
    sys.exit(main())
