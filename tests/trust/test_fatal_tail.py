"""The FATAL tail (issue 22 item 9): a last log line longer than the old 256 KiB window no
longer hides the lines before it; it is shown cut, its length said."""

from __future__ import annotations

from server_control.state.run_logs import LINE_CAP, tail_lines


def test_a_huge_last_line_is_cut_and_the_lines_before_it_are_shown(tmp_path):
    log = tmp_path / "server.log"
    lines = [f"Traceback line {i}" for i in range(60)]
    log.write_bytes(("\n".join(lines) + "\n").encode() + b"E" * (300 * 1024) + b"\n")
    tail = tail_lines(log, 50)
    assert len(tail) == 50
    assert tail[:-1] == lines[-49:]
    assert tail[-1].startswith("E" * 100) and tail[-1].endswith(f"[{300 * 1024 - LINE_CAP} bytes cut]")


def test_plain_tails(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"a\n\x1b[31mb\x1b[0m\nc")
    assert tail_lines(log, 2) == ["b", "c"]
    assert tail_lines(log, 10) == ["a", "b", "c"]
    log.write_bytes(b"")
    assert tail_lines(log, 3) == []
    assert tail_lines(tmp_path / "missing.log", 3) == []


def test_a_last_line_longer_than_the_scan_is_still_shown(tmp_path):
    """A FATAL tail whose last line was over the 32 MiB scan said "last 0 lines"."""
    log = tmp_path / "server.log"
    with open(log, "wb") as f:
        f.write(b"before\n")
        f.write(b"Q" * (2 * 1024 * 1024))  # no newline; the scan below is 1 MiB
    tail = tail_lines(log, 50, max_bytes=1024 * 1024)
    assert len(tail) == 1 and tail[0].startswith("[a line begun more than 1048576 bytes before the end] QQQ")
    assert tail[0].endswith("bytes cut]")
