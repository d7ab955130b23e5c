"""The operator's regex rule: one for `specconsole logs --grep`, the store's filter and
search, and the console's `/` filter and `ctrl+f` search, so they always match alike.

Smart case (as in less -i and ripgrep --smart-case): a pattern with no upper-case letter
ignores case; one upper-case letter makes the whole pattern case-sensitive. Letters of
escapes (``\\S``, ``\\W``, ``\\D``, ``\\B``) do not count. A bad pattern raises ValueError
naming it and the reason.
"""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\.")


def is_case_sensitive(text: str) -> bool:
    """True when ``text`` has an upper-case letter outside a backslash escape."""
    return any(ch.isupper() for ch in _ESCAPE.sub("", text))


def compile_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """Compile an operator's regex with the smart-case rule (a compiled one passes through)."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string, got {pattern!r}")
    try:
        return re.compile(pattern, 0 if is_case_sensitive(pattern) else re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
