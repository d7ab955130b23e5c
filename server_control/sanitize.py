"""Terminal-safe text: the one place that removes escape sequences and control characters
from text a server (or its log) controls, before anything shows or stores it.

Removed: CSI sequences (``ESC [ ... final`` and the one-byte C1 CSI ``\\x9b``), string
sequences (OSC ``ESC ]``, DCS ``ESC P``, SOS ``ESC X``, PM ``ESC ^``, APC ``ESC _`` and
their C1 forms) up to BEL or ST (``ESC \\``, ``\\x9c``) -- an unterminated one ends at
the line's end and never hides the next lines --, other two-byte escapes, every C0
control except tab and newline, DEL, the C1 controls U+0080..U+009F, and the bidirectional
controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069: they reorder what a
terminal shows, e.g. U+202E turns the rest of a line around). Tab and newline stay.
"""

from __future__ import annotations

import json
import re

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_CONTROL_BYTES = bytes(range(0, 9)) + bytes(range(11, 32)) + b"\x7f"
_C1 = re.compile(r"[\x80-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def strip_controls(text: str) -> str:
    """``text`` without escape sequences and control characters (tab and newline kept;
    CR LF becomes LF)."""
    if _UNSAFE.search(text) is None:
        return text
    return _ESCAPES.sub("", text.replace("\r\n", "\n"))


def clean_json(value: object) -> object:
    """A parsed JSON document from a server with ``strip_controls`` applied to every string
    (keys too): whatever part of it is shown later is already terminal-safe."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {strip_controls(k) if isinstance(k, str) else k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def loads_clean(text: str) -> object:
    """``clean_json(json.loads(text))``, without the walk when ``text`` holds nothing to
    remove: no unsafe character and no backslash (an escape, ``\\u001b`` or ``\\b``, is how a
    JSON string brings a control character that the raw text does not show)."""
    value = json.loads(text)
    if "\\" not in text and _UNSAFE.search(text) is None:
        return value
    return clean_json(value)


def clean_lines(data: bytes) -> list[str]:
    """``clean_bytes`` split into lines (a sequence left open ends with its line)."""
    return clean_bytes(data).splitlines()


def clean_bytes(data: bytes) -> str:
    """Decode (invalid UTF-8 -> U+FFFD), then ``strip_controls``; a fast path skips the
    regex for the common line with nothing to remove."""
    text = data.decode("utf-8", "replace")
    if len(data.translate(None, _CONTROL_BYTES)) != len(data) or "\x9b" in text or _has_c1(text):
        text = _ESCAPES.sub("", text.replace("\r\n", "\n"))
    return text


def _has_c1(text: str) -> bool:
    # C1 and bidi controls are never ASCII: skip the regex for pure ASCII.
    return not text.isascii() and _C1.search(text) is not None
