"""SGLang's own ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`` switched on a running rig server
(test rig only): the negative control of the warm-draft check without a server of its own.

SGLang 0.5.23 reads that variable at every target-only step
(``eagle_worker_v2.forward_batch_generation``: ``envs.SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND.get()``,
which reads ``os.environ`` each call) and, when it is set, stubs draft-extend out
(``_stub_skipped_draft_extend``). With ``SPECCONSOLE_RIG_SKIP_DRAFT_EXTEND_FILE=PATH`` in a
server's environment this hook makes that read also say yes while PATH exists, so a test
creates the file, runs its probe, and removes it (``RigServer.skipping_draft_extend``): the
very code path a server started with the variable takes, step for step, on the same server
that runs the warm check. Without the file, or without the variable, SGLang reads its
environment as always.
"""

from __future__ import annotations

import os
from typing import Any

MODULE = "sglang.srt.environ"
FILE_ENV = "SPECCONSOLE_RIG_SKIP_DRAFT_EXTEND_FILE"
SGLANG_ENV = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"


def install(module: Any) -> None:
    path = os.environ.get(FILE_ENV)
    if not path:
        return
    field = getattr(type(module.envs), SGLANG_ENV)  # the EnvBool itself (no descriptor)
    own_get = field.get

    def get() -> Any:
        return True if os.path.exists(path) else own_get()

    field.get = get


AFTER_IMPORT = {MODULE: install}
