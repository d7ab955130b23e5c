"""Preload (``SPECCONSOLE_SGLANG_PRELOAD``) for the fail-mode test: every process of the
server sees sglang 0.5.22 (a stand-in ``sglang.version`` module put in place before any
SGLang import), so the patch's version gate says no on the real 0.5.23 package."""

import sys
import types

fake = types.ModuleType("sglang.version")
fake.__version__ = "0.5.22"  # type: ignore[attr-defined]
fake.__version_tuple__ = (0, 5, 22)  # type: ignore[attr-defined]
sys.modules.setdefault("sglang.version", fake)
