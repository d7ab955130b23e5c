"""Keep SGLang's runtime-context overrides log bounded.

``RuntimeContext.override(source, **fields)`` (``sglang/srt/runtime_context.py``) appends
``(source, fields)`` to ``_overrides_log`` on every call, and every ``/server_info``
replays the whole log on each scheduler (``resolved_server_args_dict``). Each
``apply_runtime_state`` (every switch, and every step change of the adaptive controller)
and each ``/set_internal_state`` adds an entry, so a batch hovering around N would grow
memory and per-poll cost without bound.

``compact`` drops, from every entry, the fields a later entry sets again (and entries
left empty). The replay gives the same dict (later writes win), the config bags are not
touched, and the log holds at most one entry per field. Only the history of superseded
values is lost (``overrides_log()`` shows the latest source of each field).
"""

from __future__ import annotations

from server_control.sglang_patch.sglang_shapes import OverridesLog, RuntimeContext


def compacted(log: OverridesLog) -> OverridesLog:
    """``log`` without superseded fields (pure: a new list of new dicts)."""
    seen: set[str] = set()
    out: OverridesLog = []
    for source, fields in reversed(log):
        kept = {k: v for k, v in fields.items() if k not in seen}
        seen.update(fields)
        if kept:
            out.append((source, kept))
    out.reverse()
    return out


def compact(context: RuntimeContext | None = None) -> int:
    """Compact the process's runtime-context overrides log; returns its length."""
    if context is None:
        from sglang.srt.runtime_context import get_context

        context = get_context()
    log = context._overrides_log
    if len(log) > 1:
        context._overrides_log = log = compacted(log)
    return len(log)
