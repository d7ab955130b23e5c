"""Where a target forward's time goes, op by op, inside a rig server (test rig and
benchmarks only; ``benchmarks/verify_cost.py`` reads it).

Opt-in with ``SPECCONSOLE_RIG_OP_PROFILE=DIR`` in the server environment (and
``SPECCONSOLE_RIG_OP_PROFILE_SKIP``, default 4: the forwards of each mode and batch size
left unprofiled first). The preload then runs every later *target* ``ModelRunner.forward``
under ``torch.profiler`` (CPU activities only) and adds its ``key_averages()`` to a
per-(mode, batch size) table, written to ``DIR/<pid>.ops.json`` after each profiled
forward as ``{"<MODE>:<bs>": {"forwards": n, "ops": {key: [calls, self_us, total_us]}}}``.
Ranges named ``rig:<what>`` mark the SGLang calls worth telling apart:
``IntelAMXAttnBackend.forward_extend`` / ``forward_decode`` / ``init_forward_metadata``,
``LogitsProcessor.forward``, ``MHATokenToKVPool.set_kv_buffer``. The stand-in kernels
appear as their own ops (``sgl_kernel::extend_attention_cpu``, ``...decode_attention_cpu``).
Profiling slows every op it records: compare the two modes' tables with each other,
never with an unprofiled step time.
"""

from __future__ import annotations

import functools
import json
import os
import threading

ENV = "SPECCONSOLE_RIG_OP_PROFILE"
SKIP_ENV = "SPECCONSOLE_RIG_OP_PROFILE_SKIP"
RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
AMX_MODULE = "sglang.srt.layers.attention.intel_amx_backend"
LOGITS_MODULE = "sglang.srt.layers.logits_processor"
POOL_MODULE = "sglang.srt.mem_cache.memory_pool"

_TABLES: dict[str, dict] = {}
_SEEN: dict[str, int] = {}
_LOCK = threading.Lock()


def _ranged(fn, name: str):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch

        with torch.profiler.record_function(f"rig:{name}"):
            return fn(*args, **kwargs)

    return wrapper


def add(key: str, averages) -> None:
    """Fold one profile's ``key_averages()`` into the table ``key``."""
    with _LOCK:
        table = _TABLES.setdefault(key, {"forwards": 0, "ops": {}})
        table["forwards"] += 1
        for e in averages:
            cell = table["ops"].setdefault(e.key, [0, 0.0, 0.0])
            cell[0] += e.count
            cell[1] += e.self_cpu_time_total
            cell[2] += e.cpu_time_total


def _write() -> None:
    directory = os.environ[ENV]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{os.getpid()}.ops.json")
    with _LOCK:
        text = json.dumps(_TABLES)
    with open(f"{path}.tmp", "w") as f:
        f.write(text)
    os.replace(f"{path}.tmp", path)


def patch_runner(module) -> None:
    cls = module.ModelRunner
    inner = cls.forward
    skip = int(os.environ.get(SKIP_ENV, "4"))

    @functools.wraps(inner)
    def forward(self, forward_batch, *args, **kwargs):
        if self.is_draft_worker:
            return inner(self, forward_batch, *args, **kwargs)
        key = f"{forward_batch.forward_mode.name}:{forward_batch.batch_size}"
        _SEEN[key] = _SEEN.get(key, 0) + 1
        if _SEEN[key] <= skip:
            return inner(self, forward_batch, *args, **kwargs)
        import torch

        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with torch.profiler.record_function("rig:ModelRunner.forward"):
                out = inner(self, forward_batch, *args, **kwargs)
        add(key, prof.key_averages())
        _write()
        return out

    cls.forward = forward


def patch_amx(module) -> None:
    cls = module.IntelAMXAttnBackend
    for name in ("forward_extend", "forward_decode", "init_forward_metadata"):
        setattr(cls, name, _ranged(getattr(cls, name), f"IntelAMXAttnBackend.{name}"))


def patch_logits(module) -> None:
    cls = module.LogitsProcessor
    cls.forward = _ranged(cls.forward, "LogitsProcessor.forward")


def patch_pool(module) -> None:
    cls = module.MHATokenToKVPool
    cls.set_kv_buffer = _ranged(cls.set_kv_buffer, "MHATokenToKVPool.set_kv_buffer")


AFTER_IMPORT = {RUNNER_MODULE: patch_runner, AMX_MODULE: patch_amx, LOGITS_MODULE: patch_logits, POOL_MODULE: patch_pool}
