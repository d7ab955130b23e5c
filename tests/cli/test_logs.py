"""`specconsole logs` as a real subprocess (`python -m console logs ...`)."""

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_control.logs import JSON_KEYS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "logs" / "fixtures"
SERVER_LOG = FIXTURES / "server.log"


def logs(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "console", "logs", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def json_lines(out: bytes):
    return [json.loads(line) for line in out.decode("utf-8").splitlines()]


def test_parse_json_matches_the_golden_file():
    proc = logs(SERVER_LOG, "--parse", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json_lines(proc.stdout)
    expected = json_lines((FIXTURES / "server.expected.jsonl").read_bytes())
    assert got == expected
    assert all(tuple(rec) == JSON_KEYS for rec in got)
    lines = [rec["line"] for rec in got]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    kinds = {rec["kind"] for rec in got}
    assert {"decode", "prefill", "ready", "spec_init", "spec_switch", "http", "error", "traceback", "warning", "other"} <= kinds


def test_filters_kind_grep_invert_rank():
    proc = logs(SERVER_LOG, "--json", "--kind", "spec_switch", "--kind", "spec_init")
    assert [(r["kind"], r["mode"], r["batch"], r["threshold"]) for r in json_lines(proc.stdout)] == [
        ("spec_init", None, None, 5),
        ("spec_switch", "target_only", 7, 5),
        ("spec_switch", "speculative", 3, None),
        ("spec_switch", "target_only", None, None),
    ]
    # the older wording "(decode batch 3 <= 4)" names no threshold: null
    assert json_lines(proc.stdout)[2]["text"].endswith("(decode batch 3 <= 4)")
    proc = logs(SERVER_LOG, "--grep", "Decode batch", "--invert", "--kind", "decode")
    assert proc.returncode == 0 and proc.stdout == b""
    proc = logs(SERVER_LOG, "--json", "--rank", "TP3")
    assert [r["rank"] for r in json_lines(proc.stdout)] == ["DP3 TP3"]
    proc = logs(SERVER_LOG, "--grep", r"fired up")
    assert proc.stdout.decode() == "[2026-11-29 10:00:00] The server is fired up and ready to roll!\n"


def test_bad_arguments_exit_2_and_name_the_problem(tmp_path):
    proc = logs(SERVER_LOG, "--grep", "(oops")
    assert proc.returncode == 2 and b"invalid regular expression '(oops'" in proc.stderr
    proc = logs(SERVER_LOG, "--kind", "decodes")
    assert proc.returncode == 2 and b"unknown record kind 'decodes'" in proc.stderr
    proc = logs(env={"SPECCONSOLE_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2 and b"no FILE given" in proc.stderr


def test_unreadable_file_exits_1(tmp_path):
    proc = logs(tmp_path / "missing.log")
    assert proc.returncode == 1 and b"missing.log" in proc.stderr
    proc = logs(tmp_path)
    assert proc.returncode == 1 and b"not a regular file" in proc.stderr


def test_default_file_is_the_newest_run_log(tmp_path):
    older = tmp_path / "logs" / "demo" / "20261129-100000-1.log"
    newer = tmp_path / "logs" / "other" / "20261129-110000-1.log"
    for path, text in ((older, "old run\n"), (newer, "new run\n")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.utime(older, (1_700_000_000, 1_700_000_000))
    proc = logs(env={"SPECCONSOLE_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout == b"new run\n"


def read_json_lines(proc, n, deadline_s=30.0):
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf, end = b"", time.monotonic() + deadline_s
    while buf.count(b"\n") < n:
        if time.monotonic() > end:
            raise AssertionError(f"timed out; got {buf!r}")
        if sel.select(timeout=0.2):
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
    return json_lines(buf)


def test_follow_prints_new_matching_records_and_stops_on_sigterm(tmp_path):
    path = tmp_path / "later.log"  # does not exist yet: tail -F waits for it
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "logs", str(path), "--follow", "--json", "--kind", "spec_switch"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        with open(path, "a") as f:
            f.write(
                "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 9, #token: 1, token usage: 0.00, "
                "cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0, \n"
            )
            f.write("[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to target-only (decode batch 9 > threshold 5)\n")
        [first] = read_json_lines(proc, 1)
        assert (first["line"], first["mode"], first["batch"]) == (2, "target_only", 9)
        with open(path, "w") as f:  # truncated, then a shorter content: seen as a truncation
            f.write("[2026-11-29 10:00:09 TP0] Dynamic speculation: switched to speculative (decode batch 3 <= 4, threshold 5)\n")
        [second] = read_json_lines(proc, 1)
        assert (second["line"], second["mode"], second["threshold"]) == (1, "speculative", 5)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("flag", ["--parse", "--json"])
def test_binary_garbage_does_not_crash(tmp_path, flag):
    path = tmp_path / "garbage.log"
    data = bytes(range(256)) * 50 + b"\n\x1b[31mred\n\xff"
    path.write_bytes(data)
    proc = logs(path, flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") == data.count(b"\n") + 1  # one record per line, the last unterminated
    assert b"\x1b" not in proc.stdout


def _numbered(path, n):
    with open(path, "w") as f:
        for i in range(1, n + 1):
            f.write(f"[2026-11-29 10:00:{i % 60:02d}] line {i}\n")


def test_lines_prints_only_the_last_n_and_refuses_a_bad_count(tmp_path):
    path = tmp_path / "server.log"
    _numbered(path, 30)
    res = subprocess.run(
        [sys.executable, "-m", "console", "logs", str(path), "-n", "3"], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0 and [ln.split()[-1] for ln in res.stdout.splitlines()] == ["28", "29", "30"]
    res = subprocess.run(
        [sys.executable, "-m", "console", "logs", str(path), "--lines", "2", "--grep", "line 1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and [json.loads(x)["line"] for x in res.stdout.splitlines()] == [18, 19]  # of the matches
    res = subprocess.run([sys.executable, "-m", "console", "logs", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert len(res.stdout.splitlines()) == 30  # without -f or -n: every record
    for bad in ("-1", "ten"):
        res = subprocess.run(
            [sys.executable, "-m", "console", "logs", str(path), "-n", bad], cwd=ROOT, capture_output=True, text=True
        )
        assert res.returncode == 2 and "must be a number of records >= 0 or 'all'" in res.stderr, res.stderr


@pytest.mark.parametrize("lines, want", [(None, list(range(21, 31))), ("4", [27, 28, 29, 30]), ("all", list(range(1, 31)))])
def test_follow_starts_from_the_last_lines_like_tail(tmp_path, lines, want):
    path = tmp_path / "server.log"
    _numbered(path, 30)
    argv = [sys.executable, "-m", "console", "logs", str(path), "--follow", "--json", *(["-n", lines] if lines else [])]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        first = read_json_lines(proc, len(want))
        assert [r["line"] for r in first] == want
        with open(path, "a") as f:
            f.write("[2026-11-29 10:01:00] line 31\n[2026-11-29 10:01:01] line 32\n")
        assert [r["line"] for r in read_json_lines(proc, 2)] == [31, 32]  # then every new one
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
