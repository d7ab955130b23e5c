"""``python -m tests.real_sglang.rig.launch <launch_server args>``: plain (unpatched) SGLang
with the rig preloaded (test rig only).

SGLang spawns its scheduler and detokenizer processes with the ``spawn`` start method,
which re-imports this module (as ``__mp_main__``) in every child, so the preload import
below runs in every process. ``sglang.launch_server`` runs without replacing ``__main__``
(``alter_sys=False``) for that reason.
"""

from __future__ import annotations

import runpy
import sys

from tests.real_sglang.rig import preload  # noqa: F401  (registers ops, platform override)

if __name__ == "__main__":
    sys.argv[0] = "sglang.launch_server"
    runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=False)
