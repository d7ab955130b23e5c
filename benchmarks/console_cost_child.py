"""The console's process in benchmarks/console_cost.py: the real CLI with counters.

    python benchmarks/console_cost_child.py STATS -- ARGV...

runs `specconsole ARGV` in this process, with the tree(s) of $SPECCONSOLE_BENCH_PYTHONPATH
first on sys.path (so ``--tree DIR`` measures that checkout's console), counting session
snapshots, widget refreshes and each widget's share of the terminal bytes into STATS.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def run_child(stats_path: str, argv: list[str]) -> int:
    """Runs `specconsole ARGV` in this process (the tree on PYTHONPATH), counting
    ``Session.snapshot`` calls into ``stats_path`` every 0.5 s; SIGUSR2 starts pyinstrument,
    SIGUSR1 stops it and writes ``stats_path``.prof.txt."""
    from server_control.session import session as session_mod

    counts = {"snapshots": 0}
    original = session_mod.Session.snapshot

    def counted(self):  # type: ignore[no-untyped-def]
        counts["snapshots"] += 1
        return original(self)

    session_mod.Session.snapshot = counted  # type: ignore[method-assign]
    from textual.widget import Widget

    refresh = Widget.refresh

    def counted_refresh(self, *a, **kw):  # type: ignore[no-untyped-def]
        key = "refresh:" + type(self).__name__ + (":layout" if kw.get("layout") else "")
        counts[key] = counts.get(key, 0) + 1
        return refresh(self, *a, **kw)

    Widget.refresh = counted_refresh  # type: ignore[method-assign]
    _count_bytes_by_widget(counts)

    def write_stats() -> None:
        while True:
            tmp = stats_path + ".tmp"
            Path(tmp).write_text(json.dumps({"t": time.time(), **dict(counts)}))
            os.replace(tmp, stats_path)
            time.sleep(0.5)

    threading.Thread(target=write_stats, daemon=True).start()
    prof: dict = {}

    def start_profile(_sig, _frame) -> None:
        from pyinstrument import Profiler

        prof["p"] = Profiler(interval=0.002, async_mode="disabled")
        prof["p"].start()

    def stop_profile(_sig, _frame) -> None:
        p = prof.pop("p", None)
        if p is not None:
            p.stop()
            p.last_session.save(stats_path + ".pyisession")  # re-render: pyinstrument --load ...
            Path(stats_path + ".prof.txt").write_text(p.output_text(unicode=True, show_all=False))

    signal.signal(signal.SIGUSR2, start_profile)
    signal.signal(signal.SIGUSR1, stop_profile)
    from console.cli import main

    return int(main(argv) or 0)


def _count_bytes_by_widget(counts: dict) -> None:
    """Adds ``bytes:<Widget>`` counters: each screen update's terminal bytes, shared among the
    widgets whose dirty regions it repainted (by cells; a dirty region goes to the smallest
    visible widget containing it, "bytes:(screen)" when none does, "bytes:(full)" for a full
    repaint)."""
    from textual import _compositor as comp

    render_update = comp.Compositor.render_update

    def attributed(self, *a, **kw):  # type: ignore[no-untyped-def]
        shares: dict[str, int] = {}
        full = kw.get("full") or (a and a[0]) or self.size.region in self._dirty_regions
        if full:
            shares["(full)"] = 1
        else:
            visible = self.visible_widgets
            for region in self._dirty_regions:
                owners = [
                    (r.area, type(w).__name__) for w, (r, clip) in visible.items() if r.intersection(clip).contains_region(region)
                ]
                name = min(owners)[1] if owners else "(screen)"
                shares[name] = shares.get(name, 0) + region.area
        update = render_update(self, *a, **kw)
        if update is not None:
            update._cost_shares = shares
        return update

    comp.Compositor.render_update = attributed  # type: ignore[method-assign]
    try:  # what the tree's driver sends of it (it may merge runs of one style)
        from console.driver import merge_sgr as sent
    except ImportError:

        def sent(out: str) -> str:
            return out

    for cls in (comp.ChopsUpdate, comp.LayoutUpdate):

        def wrap(original):  # type: ignore[no-untyped-def]
            def render_segments(self, console):  # type: ignore[no-untyped-def]
                out = original(self, console)
                shares = getattr(self, "_cost_shares", None) or {"(other)": 1}
                total = sum(shares.values()) or 1
                for name, cells in shares.items():
                    key = "bytes:" + name
                    counts[key] = counts.get(key, 0) + len(sent(out).encode()) * cells // total
                return out

            return render_segments

        cls.render_segments = wrap(cls.render_segments)  # type: ignore[method-assign]


if __name__ == "__main__":
    sys.path[:0] = [p for p in os.environ.get("SPECCONSOLE_BENCH_PYTHONPATH", "").split(os.pathsep) if p]
    sys.exit(run_child(sys.argv[1], sys.argv[3:]))
