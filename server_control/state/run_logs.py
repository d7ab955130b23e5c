"""The log files of a profile's runs: create one per start, read its tail, prune old ones.

* ``open_new_log(path, mode)``: a new file (``O_EXCL | O_NOFOLLOW``, exact mode, 0600 by
  default); a name already taken gets ``.1``, ``.2`` ... before ``.log``.
* ``remember(manifest, path)`` / ``prune_listed(manifest, keep, protect)``: every log file a
  profile's runs created is listed in its manifest (``runs/<name>.logs`` in the state dir).
  Pruning deletes only files listed there (with their size-rotated parts ``<log>.1`` ...),
  oldest first beyond ``keep``, so a shared ``log_dir`` never loses another program's files.
* ``prune_dir(dir, keep, protect)``: the oldest ``*.log`` of a directory that only
  specconsole writes (the fleet's log mirrors); never for a profile's ``log_dir``.
* ``tail_lines(path, n)``: the last lines of a log (invalid UTF-8 replaced).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from server_control.sanitize import clean_lines
from server_control.state.private_files import atomic_write, open_private

_ROTATED = re.compile(r"\.\d+$")


def open_new_log(path: Path, mode: int = 0o600) -> tuple[Path, int]:
    for d in reversed(path.parents):  # every directory this creates is 0700 (logs/ too)
        if not d.exists():
            d.mkdir(mode=0o700, exist_ok=True)
    candidate, stem, n = path, path.stem, 0
    while True:
        try:
            return candidate, open_private(candidate, mode)
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{stem}.{n}.log")


def log_dir_problem(log_dir: Path) -> str | None:
    """Why a run could not create its log file in ``log_dir`` (None: it can)."""
    d = Path(log_dir)
    probe = d
    while not probe.exists():  # the nearest existing ancestor must let us create
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable" + (f" (cannot create {d})" if probe != d else "")
    return None


LINE_CAP = 8 * 1024  # a tail line longer than this is shown cut, its length said
SCAN_CAP = 32 * 1024 * 1024  # at most this much of the file's end is looked through


def tail_lines(path: str | Path, n: int = 50, max_bytes: int = SCAN_CAP, line_cap: int = LINE_CAP) -> list[str]:
    """The last ``n`` lines of a file, terminal-safe (invalid UTF-8 replaced, escape
    sequences and control characters removed per line); [] if it cannot be read. A line
    longer than ``line_cap`` bytes is cut (``... [N bytes cut]``), so one huge last line
    never hides the lines before it; at most ``max_bytes`` of the end are looked through
    (a line that starts before that is left out)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return []
            newlines: list[int] = []  # offsets of '\n', from the end backwards
            pos = size
            while pos > 0 and len(newlines) <= n and size - pos < max_bytes:
                step = min(1 << 16, pos, max_bytes - (size - pos))
                pos -= step
                f.seek(pos)
                block = f.read(step)
                i = len(block)
                while len(newlines) <= n and (i := block.rfind(b"\n", 0, i)) >= 0:
                    newlines.append(pos + i)
            ends = [size] + newlines  # line k ends at ends[k], starts after ends[k + 1]
            if size and newlines and newlines[0] == size - 1:
                ends = ends[1:]  # the file ends with a newline: no empty last line
            starts = [e + 1 for e in ends[1:]]
            began_before = None  # the oldest line's start lies before the scanned end of the file
            if len(starts) < len(ends):
                starts.append(pos)  # the first line of the file, or one longer than the scan
                began_before = pos if pos > 0 else None
            out = []
            for start, stop in zip(starts, ends, strict=False):
                f.seek(start)
                data = f.read(min(stop - start, line_cap))
                text = " ".join(clean_lines(data))
                if began_before is not None and start == began_before:
                    text = f"[a line begun more than {max_bytes} bytes before the end] {text}"
                out.append(text + (f" ... [{stop - start - len(data)} bytes cut]" if stop - start > line_cap else ""))
    except OSError:
        return []
    return list(reversed(out))[-n:]


def read_manifest(manifest: str | Path) -> list[str]:
    try:
        text = Path(manifest).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return list(dict.fromkeys(line for line in text.splitlines() if line.startswith("/")))


def remember(manifest: str | Path, log_path: str | Path) -> None:
    """Add a log file this profile's run created to the manifest (caller holds the profile lock)."""
    entries = read_manifest(manifest)
    entries.append(str(Path(log_path).resolve()))
    atomic_write(manifest, "\n".join(dict.fromkeys(entries)) + "\n")


def _parts(log: Path) -> list[Path]:
    """A log and its size-rotated parts (``<log>.1``, ``<log>.2`` ...)."""
    out = [log]
    try:
        out += [p for p in log.parent.glob(log.name + ".*") if _ROTATED.search(p.name[len(log.name) :])]
    except OSError:
        pass
    return out


def _mtime(path: Path) -> float | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def prune_dir(log_dir: str | Path, keep: int, protect: tuple[str | Path, ...] = ()) -> list[Path]:
    """Delete the oldest ``*.log`` files of ``log_dir`` beyond ``keep`` (never one in ``protect``)."""
    d = Path(log_dir)
    if not d.is_dir():
        return []
    keep_set = {str(Path(p).resolve()) for p in protect}
    logs = sorted(((m, p) for p in d.glob("*.log") if (m := _mtime(p)) is not None), reverse=True)
    removed = []
    for _, p in logs[keep:]:
        if str(p.resolve()) in keep_set:
            continue
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def prune_listed(manifest: str | Path, keep: int, protect: tuple[str | Path, ...] = ()) -> list[Path]:
    """Delete the oldest logs listed in ``manifest`` beyond ``keep`` (never one in ``protect``);
    entries whose file is gone leave the manifest. Returns the files deleted."""
    keep_set = {str(Path(p).resolve()) for p in protect}
    logs = []
    for entry in read_manifest(manifest):
        mtime = _mtime(Path(entry))
        if mtime is not None:
            logs.append((mtime, entry))
    logs.sort(reverse=True)
    removed, kept = [], []
    for i, (_, entry) in enumerate(logs):
        if i < keep or entry in keep_set:
            kept.append(entry)
            continue
        for part in _parts(Path(entry)):
            if _mtime(part) is None:
                continue
            try:
                part.unlink()
                removed.append(part)
            except OSError:
                pass
    atomic_write(manifest, "".join(f"{e}\n" for e in reversed(kept)))
    return removed
