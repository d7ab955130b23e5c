"""Trust round 4 (issue 37), files and what they hold, each through the real CLI: a server
writing one line without end (item 7), files that are not regular files (9), health
intervals without a floor (12), a key in ``extra_args`` (13), and item 14's torn journal, a
FATAL tail past the 32 MiB scan, a hostile profile path under ``--dry-run`` and a state dir
that is a link to a shared directory."""

from __future__ import annotations

import json
import os
import resource
import stat
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.trust_run_faults import wrapped_profile
from server_control.state import journal, runs

if TYPE_CHECKING:
    from collections.abc import Callable

    from benchmarks.trust_audit import Audit

# the server's stdout gets 40 MB in one line before the simulator starts
NO_END = "#!/bin/sh\nhead -c 40000000 /dev/zero | tr '\\000' x\nexec {python} \"$@\"\n"


def endless_line(audit: Audit) -> tuple[bool, str]:
    """Item 7, the run log: 40 MB without a newline under ``log_rotate_mb = 1`` (3 kept)."""
    path = wrapped_profile(audit, "noend", NO_END, "log_rotate_mb = 1")
    rec = audit.launch(path)
    log = os.path.basename(rec.log_path)
    where = os.path.dirname(rec.log_path)
    parts = {p: os.path.getsize(os.path.join(where, p)) for p in os.listdir(where) if p.startswith(log)}
    total = sum(parts.values())
    ok, note = audit.stopped_clean(path)
    return ok and total <= 8_000_000, f"40 MB line -> {total} bytes on disk in {len(parts)} parts; {note}"


def _quick(audit: Audit, *args: str) -> tuple[int, str, float, int]:
    t0 = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    res = audit.cli(*args, timeout_s=30)
    rss = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) // 1024
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0, rss


def not_regular(audit: Audit, what: str) -> tuple[bool, str]:
    """Item 9: /dev/zero or a FIFO as the profile, the fleet file, the run record, the
    journal: refused in one line, at once, in bounded memory."""
    fifo = audit.root / f"fifo-{what}"
    name = f"nr{len(audit.results)}"
    profile = audit.root / f"{name}.toml"
    profile.write_text(f'name = "{name}"\n[server]\nkind = "sim"\nport = 1\n')
    if what == "profile /dev/zero":
        args: tuple[str, ...] = ("status", "--profile", "/dev/zero")
    elif what == "fleet /dev/zero":
        args = ("fleet", "status", "--fleet", "/dev/zero")
    elif what == "profile FIFO":
        os.mkfifo(fifo)
        args = ("status", "--profile", str(fifo))
    elif what == "record FIFO":
        runs.record_path(name).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.mkfifo(runs.record_path(name))
        args = ("status", "--profile", str(profile))
    else:
        jpath = journal.journal_path(audit.state)
        jpath.rename(jpath.with_name("journal.kept")) if jpath.exists() else None
        os.mkfifo(jpath)
        args = ("journal",)
    try:
        rc, said, took, rss = _quick(audit, *args)
    finally:
        if what == "record FIFO":
            runs.record_path(name).unlink(missing_ok=True)  # status may have moved it aside
        if what == "journal FIFO":
            jpath.unlink()
            kept = jpath.with_name("journal.kept")
            kept.rename(jpath) if kept.exists() else None
    said_it = "not a regular file" in said
    # `journal` reads a FIFO journal as empty (exit 0, says nothing): not hung is what is held there
    ok = took < 15 and rc != 124 and "Traceback" not in said and (said_it or what == "journal FIFO")
    return ok, f"exit {rc} in {took:.1f} s (peak child RSS so far {rss} MB): {said.strip()[-110:]!r}"


def _refused(audit: Audit, body: str, words: str, secret: str | None = None, *flags: str) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        path = audit.root / f"r4in-{len(audit.results)}.toml"
        path.write_text(body)
        res = audit.cli("launch", "--profile", str(path), *flags)
        said = res.stdout + res.stderr
        ok = res.returncode == 2 and words in said and "Traceback" not in said and (secret is None or secret not in said)
        return ok, f"exit {res.returncode}: {said.strip()[-140:]!r}"

    return run


def torn_journal(audit: Audit) -> tuple[bool, str]:
    """Item 14: a journal whose last line is torn; the next ``threshold`` entry must be read."""
    path = audit.profile("torn")
    audit.launch(path)
    jpath = journal.journal_path(audit.state)
    with open(jpath, "ab") as f:
        f.write(b'{"time": 1, "user": "x", "act')
    res = audit.cli("threshold", "9", "--profile", str(path))
    shown = audit.cli("journal", "--json")
    entries = [json.loads(x) for x in shown.stdout.splitlines() if x.startswith("{")] if shown.stdout else []
    found = any(e.get("new") == 9 for e in entries) or '"new": 9' in shown.stdout
    ok, note = audit.stopped_clean(path)
    return ok and res.returncode == 0 and found, f"threshold exit {res.returncode}; its entry read back: {found}; {note}"


def long_last_line() -> tuple[bool, str]:
    """Round 3: a 300 KB last log line in the FATAL tail is shown cut, with 49 lines before."""
    import tempfile

    from server_control.state.run_logs import tail_lines

    with tempfile.NamedTemporaryFile(suffix=".log") as f:
        f.write(b"".join(f"line {i}\n".encode() for i in range(60)) + b"E" * 300_000 + b"\n")
        f.flush()
        tail = tail_lines(Path(f.name), 50)
    return len(tail) == 50 and tail[-1].endswith("bytes cut]"), f"{len(tail)} lines"


def fatal_tail_33mib(audit: Audit) -> tuple[bool, str]:
    """Item 14: a FATAL tail whose last line is longer than the 32 MiB scanned."""
    from server_control.state.run_logs import tail_lines

    log = audit.root / "huge-last.log"
    with open(log, "wb") as f:
        f.write(b"before\n" + b"Q" * (33 << 20))
    tail = tail_lines(log, 50)
    log.unlink()
    return len(tail) == 1 and tail[0].endswith(
        "bytes cut]"
    ), f"{len(tail)} lines: {tail[0][:60] + '...' + tail[0][-30:] if tail else ''!r}"


def dry_run_path(audit: Audit) -> tuple[bool, str]:
    """Item 14: ``--dry-run`` of a profile in a directory named with an OSC sequence."""
    odd = audit.root / "p\x1b]0;owned\x07dir"
    odd.mkdir()
    (odd / "t.toml").write_text('name = "t"\n[server]\nkind = "sim"\nport = 1\n')
    res = audit.cli("launch", "--profile", str(odd / "t.toml"), "--dry-run")
    raw = "\x1b" in res.stdout or "\x07" in res.stdout
    return res.returncode == 0 and not raw, f"exit {res.returncode}; escape bytes printed: {raw}"


def state_dir_link(audit: Audit) -> tuple[bool, str]:
    """Item 14: a state dir that is a link to a world-writable directory is refused naming the
    target, never 'chmod go-w <the link>', and the target's mode stays."""
    shared = audit.root / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = audit.root / "state-link"
    link.symlink_to(shared)
    old = os.environ["SPECCONSOLE_STATE_DIR"]
    os.environ["SPECCONSOLE_STATE_DIR"] = str(link)
    try:
        res = audit.cli("status", "--profile", str(audit.profile("linked")))
    finally:
        os.environ["SPECCONSOLE_STATE_DIR"] = old
    said = res.stdout + res.stderr
    mode = stat.S_IMODE(os.stat(shared).st_mode)
    ok = str(shared) in said and f"chmod go-w {link}" not in said and mode == 0o1777 and res.returncode != 0
    return ok, f"exit {res.returncode}, mode {oct(mode)}: {said.strip()[-140:]!r}"


def check_file_faults(audit: Audit) -> None:
    audit.check("fault", "r4.7 one line without end, log_rotate_mb 1", lambda: endless_line(audit))
    for what in ("profile /dev/zero", "fleet /dev/zero", "profile FIFO", "record FIFO", "journal FIFO"):
        audit.check("input", f"r4.9 {what}", partial(not_regular, audit, what))
    head = '[server]\nkind = "sim"\n'
    for key, value in (("interval_s", "1e-300"), ("timeout_s", "0.01")):
        body, words = f"{head}[health]\n{key} = {value}\n", f"[health] {key}: must be >= 0.05 s"
        audit.check("input", f"r4.12 [health] {key} = {value}", _refused(audit, body, words, None, "--dry-run"))
    for args in ('["--api-key", "sk-live-123"]', '["--admin-api-key=sk-live-123"]', '["--api-ke", "sk-live-123"]'):
        for flags in (("--dry-run",), ("--json",)):
            run = _refused(audit, f"{head}extra_args = {args}\n", "api_key_env", "sk-live-123", *flags)
            audit.check("input", f"r4.13 extra_args = {args} {flags[0]}", run)
    audit.check("fault", "r4.14 torn last journal line", lambda: torn_journal(audit))
    audit.check("fault", "r4.14 FATAL tail, 33 MiB last line", lambda: fatal_tail_33mib(audit))
    audit.check("input", "r4.14 --dry-run of an OSC-named directory", lambda: dry_run_path(audit))
    audit.check("input", "r4.14 state dir linked to a 1777 dir", lambda: state_dir_link(audit))
