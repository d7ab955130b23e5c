"""Where a rig server's decode step goes, timed inside the scheduler process (test rig and
benchmarks only).

Opt-in with ``SPECCONSOLE_RIG_STEP_TIMING=DIR`` in the server environment; the preload
then wraps, in the process that imports them,
  * ``ModelRunner.forward``: every model forward, keyed ``target:<MODE>`` or
    ``draft:<MODE>`` (``forward_batch.forward_mode``) and the batch size;
  * ``EagleDraftWorker._draft_extend_for_decode``: the whole draft-extend after a decode
    step (its forward, lm_head, argmax and bookkeeping), keyed ``draft_extend``;
  * ``EAGLEWorkerV2.verify``: SGLang's whole verify (``run_eagle_verify``: preparation,
    the target forward, sampling, acceptance bookkeeping), keyed ``verify``;
  * the patch's own per-step calls (``server_control.sglang_patch.worker``):
    ``on_decode_step`` and ``on_verified``, keyed ``patch:on_decode_step`` /
    ``patch:on_verified``;
  * ``Scheduler.run_batch`` of a decode batch: ``run_batch`` (its duration) and
    ``step_period`` (from one decode ``run_batch`` start to the next, when the two are
    consecutive batches of the same size: a whole scheduler iteration).
Each key holds cumulative ``[calls, seconds, cpu seconds]`` per batch size (cpu: the
calling thread's CPU time, ``time.thread_time``, which a loaded machine's waits for a core
do not inflate); a daemon thread writes them
to ``DIR/<pid>.json`` every 0.25 s (atomic rename). A benchmark diffs two reads. The
scheduler's own per-step overhead is ``step_period - forward`` on a plain server.

With ``SPECCONSOLE_RIG_STEP_TRACE=1`` as well, every decode ``run_batch`` of a patched
server also appends one row to a trace (the last ``TRACE_CAP`` rows, written to
``DIR/<pid>.trace.json``): ``[start, seconds, batch, speculative steps, target-only steps,
verifies, accepted drafts]``, the step counters read from the patch's switch after the
step and the acceptance counters before it (so row i+1 minus row i is step i's mode and,
for the acceptance columns, step i's verifies; benchmarks/switch_trace.py reads it).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

ENV = "SPECCONSOLE_RIG_STEP_TIMING"
RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
EAGLE_MODULE = "sglang.srt.speculative.eagle_worker_v2"
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"

_TOTALS: dict[str, dict[int, list[float]]] = {}
_LOCK = threading.Lock()
_WRITER: list[threading.Thread] = []
_LAST_DECODE: list[tuple[float, int, float]] = []  # (start, batch size, thread cpu) of the last decode run_batch
TRACE_ENV = "SPECCONSOLE_RIG_STEP_TRACE"
TRACE_CAP = 20000
_TRACE: list[list[float]] = []


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def record(key: str, bs: int, seconds: float, cpu_seconds: float = 0.0) -> None:
    with _LOCK:
        cell = _TOTALS.setdefault(key, {}).setdefault(int(bs), [0, 0.0, 0.0])
        cell[0] += 1
        cell[1] += seconds
        cell[2] += cpu_seconds
    if not _WRITER:
        _start_writer()


def snapshot() -> dict:
    with _LOCK:
        return {k: {str(bs): list(v) for bs, v in cells.items()} for k, cells in _TOTALS.items()}


def _start_writer() -> None:
    directory = os.environ[ENV]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{os.getpid()}.json")

    def loop() -> None:
        while True:
            tmp = f"{path}.tmp"
            with open(tmp, "w") as f:
                json.dump(snapshot(), f)
            os.replace(tmp, path)
            if os.environ.get(TRACE_ENV):
                with _LOCK:
                    rows = list(_TRACE)
                with open(tmp, "w") as f:
                    json.dump(rows, f)
                os.replace(tmp, f"{path[:-5]}.trace.json")
            time.sleep(0.25)

    t = threading.Thread(target=loop, name="rig-step-timing", daemon=True)
    _WRITER.append(t)
    t.start()


def _timed(fn, key_of):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            key, bs = key_of(*args, **kwargs)
            if key:
                record(key, bs, time.perf_counter() - t0, time.thread_time() - c0)

    return wrapper


def _runner_key(self, forward_batch, *args, **kwargs):
    role = "draft" if self.is_draft_worker else "target"
    return f"{role}:{forward_batch.forward_mode.name}", forward_batch.batch_size


def patch_runner(module) -> None:
    cls = module.ModelRunner
    cls.forward = _timed(cls.forward, _runner_key)


def _extend_key(self, batch, *args, **kwargs):
    return "draft_extend", batch.batch_size()


def _verify_key(self, batch, *args, **kwargs):
    return "verify", batch.batch_size()


def patch_eagle(module) -> None:
    cls = module.EagleDraftWorker
    cls._draft_extend_for_decode = _timed(cls._draft_extend_for_decode, _extend_key)
    module.EAGLEWorkerV2.verify = _timed(module.EAGLEWorkerV2.verify, _verify_key)


def patch_switch(module) -> None:
    """The patch's per-step functions (called by attribute, so wrapping the module's names
    times every call)."""
    module.on_decode_step = _timed(module.on_decode_step, lambda worker, bs, *a, **k: ("patch:on_decode_step", bs))
    module.on_verified = _timed(module.on_verified, lambda worker, n, *a, **k: ("patch:on_verified", len(n)))


def _run_batch_key(self, batch, *args, **kwargs):
    if not batch.forward_mode.is_decode():
        return None, 0
    return "run_batch", batch.batch_size()


def patch_scheduler(module) -> None:
    cls = module.Scheduler
    inner = _timed(cls.run_batch, _run_batch_key)

    @functools.wraps(cls.run_batch)
    def run_batch(self, batch, *args, **kwargs):
        if batch.forward_mode.is_decode():
            now, bs, cpu = time.perf_counter(), batch.batch_size(), time.thread_time()
            if _LAST_DECODE and _LAST_DECODE[0][1] == bs and now - _LAST_DECODE[0][0] < 5:
                record("step_period", bs, now - _LAST_DECODE[0][0], cpu - _LAST_DECODE[0][2])
            _LAST_DECODE[:] = [(now, bs, cpu)]
        else:
            _LAST_DECODE.clear()
        return inner(self, batch, *args, **kwargs)

    cls.run_batch = run_batch if not os.environ.get(TRACE_ENV) else _traced(run_batch)


def _switch_counts(scheduler) -> tuple[int, int, int, int] | None:
    switch = getattr(getattr(getattr(scheduler, "draft_worker", None), "_dynspec", None), "switch", None)
    if switch is None:
        return None
    return (switch.steps["speculative"], switch.steps["target_only"], switch.verifies, switch.accepted_drafts)


def _traced(run_batch):
    @functools.wraps(run_batch)
    def traced(self, batch, *args, **kwargs):
        if not batch.forward_mode.is_decode():
            return run_batch(self, batch, *args, **kwargs)
        before = _switch_counts(self)
        t0 = time.perf_counter()
        try:
            return run_batch(self, batch, *args, **kwargs)
        finally:
            after = _switch_counts(self)
            if before is not None and after is not None:
                row = [t0, time.perf_counter() - t0, batch.batch_size(), after[0], after[1], before[2], before[3]]
                with _LOCK:
                    _TRACE.append(row)
                    del _TRACE[:-TRACE_CAP]

    return traced


SWITCH_MODULE = "server_control.sglang_patch.worker"
AFTER_IMPORT = {
    RUNNER_MODULE: patch_runner,
    EAGLE_MODULE: patch_eagle,
    SCHEDULER_MODULE: patch_scheduler,
    SWITCH_MODULE: patch_switch,
}
