"""The keeper's log writer (proc/keeper.py ``LogWriter``): parts rotate at line boundaries,
and a line without end (a server writing one) is cut, so the run's disk stays bounded."""

from __future__ import annotations

import os

from server_control.proc.keeper import LogWriter


def _writer(tmp_path, max_bytes: int, keep: int) -> tuple[LogWriter, str]:
    path = str(tmp_path / "r.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return LogWriter(fd, path, 0o600, max_bytes, keep), path


def _parts(tmp_path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("r.log")}


def test_a_line_without_end_is_cut_and_rotated(tmp_path):
    """Before: one 10 MB part with max_bytes 1000 (2.2 GB in 7 s in the audit)."""
    w, _ = _writer(tmp_path, 1000, 3)
    chunk = b"x" * 65536
    for _ in range(160):  # 10 MB, no newline
        w.write(chunk)
    parts = _parts(tmp_path)
    assert sorted(parts) == ["r.log", "r.log.1", "r.log.2", "r.log.3"]
    assert max(parts.values()) <= 1000, parts
    assert w.rotations >= 10_000


def test_ordinary_lines_stay_whole_across_parts(tmp_path):
    w, path = _writer(tmp_path, 1000, 100)
    lines = [f"line {i:05d} ".encode() + b"y" * (i % 90) + b"\n" for i in range(400)]
    data = b"".join(lines)
    for i in range(0, len(data), 777):  # chunks that end mid-line
        w.write(data[i : i + 777])
    names = sorted(_parts(tmp_path), key=lambda n: -int(n.rsplit(".", 1)[1]) if n != "r.log" else 0)
    joined = b"".join((tmp_path / n).read_bytes() for n in names)
    assert joined == data
    for n in names:
        body = (tmp_path / n).read_bytes()
        assert body.endswith(b"\n") and len(body) <= 1000 + 110, (n, len(body))


def test_a_long_line_between_ordinary_ones_is_cut_and_the_rest_kept(tmp_path):
    w, _ = _writer(tmp_path, 1000, 100)
    data = b"before\n" + b"z" * 5000 + b"\nafter\n"
    w.write(data)
    names = sorted(_parts(tmp_path), key=lambda n: -int(n.rsplit(".", 1)[1]) if n != "r.log" else 0)
    joined = b"".join((tmp_path / n).read_bytes() for n in names)
    assert joined == data  # nothing lost, only cut
    assert max(_parts(tmp_path).values()) <= 1000
