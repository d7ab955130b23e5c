"""Control sequences are removed line by line: an unterminated OSC (``ESC ] 0;x`` with no
BEL or ST) or DCS on one line never hides the lines after it, whatever the chunking."""

from __future__ import annotations

import pytest

from server_control.logs import iter_file
from server_control.logs.lines import LineSplitter

CRASH = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "RuntimeError: boom"]
HOSTILE = [
    "Updating \x1b]0;owned is not supported.",  # unterminated OSC (title)
    "Updating \x1b]52;c;aGk= is not supported.",  # unterminated OSC 52 (clipboard)
    "link \x1b]8;;http://x\x1b\\text",  # hyperlink opened, never closed
    "dcs \x1bP1$r\x1b[0m",  # DCS without its string terminator
    "c1 \u009d0;title",  # C1 OSC
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_an_unterminated_sequence_hides_nothing_after_it(hostile):
    text = "\n".join(["before", hostile, *CRASH, "after"]) + "\n"
    lines, _ = LineSplitter().feed(text.encode())
    assert lines[0] == "before" and lines[2:] == [*CRASH, "after"], lines
    assert all(not any(c in line for c in "\x1b\x07\u009d\u0090") for line in lines)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_any_chunking_cuts_the_sequence_at_its_line(tmp_path, hostile):
    text = "a\n" + hostile + "\n" + "\n".join(CRASH) + "\nz\n"
    path = tmp_path / "server.log"
    path.write_bytes(text.encode())
    for chunk in (1, 7, 64, 1 << 20):
        raws = []
        for _, _kinds, raw in iter_file(path, chunk_size=chunk):
            raws += raw
        joined = "\n".join(raws)
        assert "RuntimeError: boom" in joined and joined.splitlines()[-1] == "z", (chunk, raws)
        assert "\x1b" not in joined


def test_terminated_sequences_keep_the_visible_text():
    lines, _ = LineSplitter().feed(b"\x1b[31mred\x1b[0m \x1b]0;t\x07title \x1b]8;;u\x1b\\link\x1b]8;;\x1b\\\n")
    assert lines == ["red title link"]
