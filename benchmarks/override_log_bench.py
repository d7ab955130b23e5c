"""Cost of SGLang's runtime-context overrides log after many switches, with and without the
patch's compaction (needs sglang==0.5.23).

    python -m benchmarks.override_log_bench [--flips 10000]

Every switch runs SGLang's ``apply_runtime_state``, whose last act is
``get_context().override("adaptive_spec.restore", speculative_num_steps=...,
speculative_num_draft_tokens=...)``; every ``/server_info`` replays the whole log on each
scheduler (``resolved_server_args_dict``). This replays ``--flips`` such overrides on a
real published ServerArgs, then prints, for each variant: the log length, the memory the
log holds (tracemalloc), and the time of one readback replay (best of 20).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc


def _flips(context, n: int, compact) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        steps = 0 if i % 2 == 0 else 3
        context.override("adaptive_spec.restore", speculative_num_steps=steps, speculative_num_draft_tokens=steps + 1)
        if compact is not None:
            compact(context)
    return (time.perf_counter() - t0) / max(1, n)


def _readback_ms(context) -> float:
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        context.resolved_server_args_dict()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def run(flips: int, compacting: bool) -> str:
    from sglang.srt.runtime_context import get_context

    from server_control.sglang_patch import overrides

    override = get_context().override_server_args(
        speculative_algorithm="EAGLE3", speculative_eagle_topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4
    )
    override.install()
    try:
        context = get_context()
        empty_ms = _readback_ms(context)
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        per_flip = _flips(context, flips, overrides.compact if compacting else None)
        grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
        tracemalloc.stop()
        return (
            f"{'patch (compacted)' if compacting else 'SGLang alone':<18} {flips} flips: "
            f"log length {len(context._overrides_log)}, log memory +{grown / 1024:.1f} KiB, "
            f"readback {empty_ms:.3f} ms -> {_readback_ms(context):.3f} ms per rank per "
            f"/server_info, override{' + compact' if compacting else ''} "
            f"{per_flip * 1e6:.1f} us per flip"
        )
    finally:
        override.restore()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.flips < 1:
        parser.error(f"--flips must be >= 1, got {args.flips}")
    from server_control.sglang_patch import hook

    hook.install()
    for compacting in (False, True):
        print(run(args.flips, compacting))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
