"""What the rig benchmarks that watch one patched server's every step share: the server,
launched with the per-step trace of tests/real_sglang/rig/step_timing.py, and the report
(``--out``, ``--json`` or the table, the exit code). Used by benchmarks/switch_cost.py and
benchmarks/warm_draft.py."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def traced_server(
    models: str, extra: tuple[str, ...], threads: int, log, left: list[int], steps: int | None = None
) -> Iterator[tuple[Any, Path]]:
    """A patched rig server (tests/real_sglang/rig) writing the per-step trace of
    rig/step_timing.py, ready: (the server, the trace's directory); stopped on leaving, the
    pids it left appended to ``left``."""
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch
    from tests.real_sglang.rig.step_timing import ENV, TRACE_ENV

    with tempfile.TemporaryDirectory(prefix="rig-traced-") as tmp:
        timing = Path(tmp) / "timing"
        env = {ENV: str(timing), TRACE_ENV: "1", "OMP_NUM_THREADS": str(threads)}
        spec = Spec(models, extra=extra) if steps is None else Spec(models, steps=steps, extra=extra)
        server = launch(ensure_rig(), spec, Path(tmp), 7200, env)
        try:
            log(f"{models} patched server ready in {server.wait_ready(timeout_s=1200):.0f} s")
            yield server, timing
        finally:
            left.extend(server.stop())


def finish(summary: dict, opts: argparse.Namespace, render_fn) -> int:
    """Save (``--out``), print (``--json`` or the table) and the exit code: 1 on a problem, a
    failed request or a process left."""
    if opts.out:
        opts.out.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1) if opts.json else render_fn(summary))
    return 0 if not summary["problems"] and not summary["errors"] and not summary["processes_left"] else 1


def log_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
