"""Imported by every Python process run with the bundle's environment (``gpu_bundle/site``
is on ``PYTHONPATH``): the plain server too, which the patched server's preload never sees.

SGLang 0.5.23's ``LlamaMLP`` imports ``sglang.kernels.ops.gemm.cutedsl_dual_gemm`` on CUDA,
which imports ``cutlass`` (nvidia-cutlass-dsl, not in the bundle) at module level. That
kernel is SM100-only (``can_use_dual_gemm`` is false on an H200) and never chosen for float32
weights, so the module is stood in for by the names ``dual_gemm.py`` imports, with the
predicate always false. Likewise the EAGLE v2 worker imports
``sglang.srt.layers.attention.flashmla_backend`` (which imports ``flash_mla``, not in the
bundle) only to test ``isinstance(backend, FlashMLABackend)`` before capturing the
draft-extend graph: it is stood in for by a class nothing instantiates. Nothing else is
replaced.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from enum import IntEnum

DUAL_GEMM = "sglang.kernels.ops.gemm.cutedsl_dual_gemm"
FLASHMLA_BACKEND = "sglang.srt.layers.attention.flashmla_backend"


class _DualGemmStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname not in (DUAL_GEMM, FLASHMLA_BACKEND):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        if module.__name__ == FLASHMLA_BACKEND:

            class FlashMLABackend:
                def __init__(self, *args, **kwargs) -> None:
                    raise NotImplementedError(f"{FLASHMLA_BACKEND}: stand-in (no flash_mla in the GPU bundle)")

            module.FlashMLABackend = FlashMLABackend
            return

        class DualGemmQuantMode(IntEnum):
            STATIC_PER_TENSOR = 0
            STATIC_PER_TOKEN = 1
            DYNAMIC_PER_TENSOR = 2
            DYNAMIC_PER_TOKEN = 3
            UNQUANT = 4

            @property
            def is_quantized(self) -> bool:
                return self is not DualGemmQuantMode.UNQUANT

        def can_use_dual_gemm(*args, **kwargs) -> bool:
            return False

        def _absent(*args, **kwargs):
            raise NotImplementedError(f"{DUAL_GEMM}: stand-in (no cutlass in the GPU bundle)")

        module.MAX_DUAL_GEMM_DECODE_TOKENS = 16
        module.DualGemmQuantMode = DualGemmQuantMode
        module.can_use_dual_gemm = can_use_dual_gemm
        module.dual_gemm_swiglu = _absent
        module.dual_gemm_swiglu_fp8 = _absent


if not any(isinstance(f, _DualGemmStandIn) for f in sys.meta_path):
    sys.meta_path.insert(0, _DualGemmStandIn())
