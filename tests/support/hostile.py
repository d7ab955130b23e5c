"""What a terminal must never get: raw control characters or a hostile sequence's payload."""

from __future__ import annotations

PAYLOADS = ("pwned-title", "aGVsbG8=", "evil.example", "1$qm")  # what the sequences carried


def assert_clean(text: str, where: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in text if c in "\x1b\x07" or "\x80" <= c <= "\x9f"})
    assert not raw, f"{where}: raw control characters {raw} reach the terminal:\n{text!r}"
    assert not [p for p in PAYLOADS if p in text], f"{where}: a sequence's payload is shown:\n{text!r}"
