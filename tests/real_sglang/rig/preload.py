"""Imported first in every SGLang process of a rig server (test rig only).

Named in ``SPECCONSOLE_SGLANG_PRELOAD`` (the patch's bootstrap imports it) or imported by
``launch.py``. It (1) registers the pure-torch ``sgl_kernel`` CPU operators and (2) tells
SGLang this CPU has AMX, so ``--attention-backend intel_amx`` (the only backend the CPU
EAGLE draft worker accepts) is not downgraded to torch_native. Only SGLang's
``get_platform().has_amx`` reads the override; layer code keeps its plain torch paths.
"""
from __future__ import annotations

from . import cpu_ops

cpu_ops.register()

try:
    from sglang.srt.runtime_context import override_platform
except ImportError:  # sglang absent: the operators alone are still usable in unit tests
    PLATFORM_OVERRIDE = None
else:
    PLATFORM_OVERRIDE = override_platform(has_amx=True)
    PLATFORM_OVERRIDE.install()
