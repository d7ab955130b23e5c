"""Trust round 4 (issue 37), the faults of a run and its processes, each against the real CLI,
real simulator runs and real signals: a state filesystem remounted read-only (item 1), an
interrupted ``stop`` (2), impossible pids in the record (3), a launcher killed before it
read the keeper's answer (4), the FATAL record read twice (11), ``ready_at`` of a run seen
ready by ``launch --wait`` (14) and ``supervise`` on a full disk (14)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from server_control.state import runs

if TYPE_CHECKING:
    from benchmarks.trust_audit import Audit

# the run's leader starts a child that ignores SIGTERM, then becomes the simulator
IGNORES_TERM = "#!/bin/sh\n(trap '' TERM; exec sleep 120) &\nexec {python} \"$@\"\n"
CRASHES = "#!/bin/sh\necho 'audit: this server crashes at once' >&2\nexit 1\n"


def wrapped_profile(audit: Audit, name: str, script: str, server_extra: str = "") -> Path:
    """A sim profile whose ``python`` is a shell wrapper (``{python}``: the real one)."""
    wrapper = audit.root / f"{name}-python"
    wrapper.write_text(script.format(python=sys.executable))
    wrapper.chmod(0o755)
    path = audit.profile(name, server_extra)
    path.write_text(path.read_text().replace(f'python = "{sys.executable}"', f'python = "{wrapper}"'))
    return path


def _group(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == pgid:
                    out.append(int(name))
            except (ProcessLookupError, PermissionError):
                pass
    return out


def _popen_cli(audit: Audit, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *args],
        cwd=audit.root,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    audit.pids.note(proc.pid, f"console {args[0]}")
    return proc


def _mount(audit: Audit, label: str, opts: str) -> Path | str:
    mnt = audit.root / f"fs-{label}"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True, text=True)
    return mnt if res.returncode == 0 else f"cannot mount a tmpfs ({res.stderr.strip()})"


def read_only_state(audit: Audit) -> tuple[bool, str]:
    """Item 1: the state dir made read-only after launch (a read-only bind mount over it: a
    remount of a filesystem with the keeper's log open for writing is refused as busy, while
    ext4 after I/O errors forces it); ``supervise`` says it cannot take the restart lock
    (the state is read-only) and never that somebody else supervises, ``stop`` signals
    anyway and says what it could not write."""
    state = audit.root / "ro-state"
    old = os.environ["SPECCONSOLE_STATE_DIR"]
    os.environ["SPECCONSOLE_STATE_DIR"] = str(state)
    bound = False
    try:
        path = audit.profile("rostate")
        rec = audit.launch(path, "--no-supervise")  # the lock free: the subject is this check's own supervise
        for cmd in (["mount", "--bind", str(state), str(state)], ["mount", "-o", "remount,bind,ro", str(state)]):
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                audit.cli("stop", "--profile", str(path))
                why = f"cannot make a read-only bind ({res.stderr.strip()})"
                return False, f"not run here: {why}; tests/trust/test_read_only_state.py injects EROFS"
            bound = True
        sup = _popen_cli(audit, "supervise", "--profile", str(path))
        time.sleep(4)
        if sup.poll() is None:
            sup.send_signal(signal.SIGTERM)
        sup_said = (sup.communicate(timeout=30)[0] or "").strip()
        res = audit.cli("stop", "--profile", str(path))
        time.sleep(0.3)
        left = _group(rec.pgid)
        lied = "another process supervises" in sup_said
        cannot = "cannot take the restart lock" in sup_said and "read-only" in sup_said
        said = res.stdout + res.stderr
        ok = not left and "could not" in said and "Traceback" not in said + sup_said and not lied and cannot
        last = sup_said.splitlines()[-2:] if sup_said else []
        stop = f"stop exit {res.returncode}: {said.strip()[-150:]!r}; left {left}"
        return ok, f"read-only bind; supervise: {last} (says it cannot lock: {cannot}; claims another: {lied}); {stop}"
    finally:
        os.environ["SPECCONSOLE_STATE_DIR"] = old
        if bound:
            subprocess.run(["umount", "-l", str(state)], check=False)


def interrupted_stop(audit: Audit, sig: signal.Signals) -> tuple[bool, str]:
    """Item 2: ``stop`` gets SIGHUP/SIGTERM inside its grace; a process of the run that
    ignores SIGTERM must still get its SIGKILL, and the record must not stay 'stopping'."""
    path = wrapped_profile(audit, f"intr{int(sig)}", IGNORES_TERM)
    rec = audit.launch(path)
    stopper = _popen_cli(audit, "stop", "--profile", str(path))
    time.sleep(1.0)  # inside the 3 s grace
    stopper.send_signal(sig)
    out = stopper.communicate(timeout=40)[0] or ""
    deadline = time.monotonic() + 5
    while _group(rec.pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _group(rec.pgid)
    status = audit.cli("status", "--profile", str(path))
    finished = f"finished the stop before acting on {sig.name}" in out
    ok = not left and stopper.returncode == 128 + int(sig) and finished and runs.load_record(path.stem) is None
    return (
        ok,
        f"stop exit {stopper.returncode}, said finished first: {finished}; left {left}; status: {status.stdout.strip()[:80]!r}",
    )


def impossible_pid(audit: Audit, field: str, value: int) -> tuple[bool, str]:
    """Item 3: ``pid``/``pgid`` 0 or -1 in the record: moved aside, recovered from the keeper's
    note, and ``stop`` never says stopped while the leader still serves."""
    path = audit.profile(f"bad{field}{abs(value)}")
    rec = audit.launch(path)
    rp = runs.record_path(path.stem)
    data = json.loads(rp.read_text())
    data[field] = value
    rp.write_text(json.dumps(data))
    status = audit.cli("status", "--profile", str(path))
    said = status.stdout + status.stderr
    res = audit.cli("stop", "--profile", str(path))
    time.sleep(0.3)
    serving = audit.serving(audit.ports[-1])
    ok = "Traceback" not in said + res.stderr and "keeper's note" in said and res.returncode == 0 and not serving
    if res.returncode == 0 and serving:
        ok = False  # said stopped while this run's leader still serves
    if serving:
        os.killpg(rec.pgid, signal.SIGKILL)
    return ok, f"status: {said.strip()[:100]!r}; stop exit {res.returncode}: {res.stdout.strip()[:60]!r}; serving after {serving}"


def launcher_killed_after_record(audit: Audit) -> tuple[bool, str]:
    """Item 4, through the CLI: ``launch`` SIGKILLed the moment its record exists (the keeper
    answers into a pipe nobody reads); the keeper must stay and keep the exit status."""
    path = audit.profile("keeperpipe")
    rp = runs.record_path(path.stem)
    launcher = _popen_cli(audit, "launch", "--profile", str(path))
    deadline = time.monotonic() + 60
    while not rp.exists() and time.monotonic() < deadline and launcher.poll() is None:
        time.sleep(0.001)
    launcher.kill()
    launcher.wait()
    time.sleep(1.0)
    rec = runs.load_record(path.stem)
    if rec is None:
        return False, "no record after the launcher was killed"
    audit.pids.note_record(rec)
    keeper_alive = rec.keeper_pid is not None and _group(rec.pgid) != [] and _alive(rec.keeper_pid)
    os.killpg(rec.pgid, signal.SIGTERM)  # the server ends on its own: the keeper must record it
    deadline = time.monotonic() + 20
    code = None
    while code is None and time.monotonic() < deadline:
        try:
            code = json.loads(runs.exit_file(path.stem).read_text()).get("returncode")
        except (OSError, ValueError):
            time.sleep(0.1)
    audit.cli("stop", "--profile", str(path))
    return (
        keeper_alive and code is not None,
        f"keeper {rec.keeper_pid} alive after the kill: {keeper_alive}; exit recorded: {code}",
    )


def keeper_reply_pipe_closed(audit: Audit) -> tuple[bool, str]:
    """Item 4, deterministic: the keeper itself (a real process) with its reply pipe's read
    end closed before the request, as the issue reproduced it."""
    from server_control.proc.process import _keeper_env

    log_path, exit_path = audit.root / "kp.log", audit.root / "kp.exit"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    server = "import time; print('first', flush=True); time.sleep(1.0); print('last', flush=True)"
    request: dict[str, object] = {"argv": [sys.executable, "-c", server], "env": dict(os.environ), "cwd": str(audit.root)}
    request.update(log_fd=log_fd, log_path=str(log_path), exit_file=str(exit_path))
    rfd, wfd = os.pipe()
    os.close(rfd)
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "server_control.keeper"],
            stdin=subprocess.PIPE,
            stdout=wfd,
            stderr=log_fd,
            pass_fds=(log_fd,),
            start_new_session=True,
            env=_keeper_env(),
        )
        audit.pids.note(keeper.pid, "keeper (pipe closed)")
        audit.pids.note_group(keeper.pid, "keeper (pipe closed) group")
        keeper.communicate(json.dumps(request).encode(), timeout=30)
    finally:
        os.close(wfd)
        os.close(log_fd)
    deadline, status = time.monotonic() + 20, None
    while time.monotonic() < deadline:
        try:
            status = json.loads(exit_path.read_text())
        except (OSError, ValueError):
            status = None
        if status is not None and status.get("returncode") is not None:
            break
        time.sleep(0.1)
    tail = log_path.read_text(errors="replace").splitlines()[-2:]
    return status is not None and status.get("returncode") == 0 and tail == [
        "first",
        "last",
    ], f"exit file {status}; log ends {tail}"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def fatal_read_twice(audit: Audit) -> tuple[bool, str]:
    """Item 11: after ``supervise`` hits its start limit, two ``status`` in a row both show
    FATAL with the exit code (the first read deleted the record); ``stop`` clears it."""
    path = wrapped_profile(audit, "fatal", CRASHES)
    sup = _popen_cli(audit, "supervise", "--profile", str(path))
    out = sup.communicate(timeout=90)[0] or ""
    reads = [audit.cli("status", "--profile", str(path)).stdout for _ in range(2)]
    kept = all("fatal" in r.lower() and "exit 1" in r for r in reads)
    stop = audit.cli("stop", "--profile", str(path))
    gone = runs.load_record(path.stem) is None
    return kept and sup.returncode == 1 and gone, (
        f"supervise exit {sup.returncode} ({out.strip()[-60:]!r}); status twice: {[r.strip()[:50] for r in reads]}; "
        f"stop exit {stop.returncode}, record gone {gone}"
    )


def ready_at_written(audit: Audit) -> tuple[bool, str]:
    """Item 14: an unsupervised run seen ready by ``launch --wait`` reads unhealthy, not
    'starting', once its server hangs (SIGSTOP of its group)."""
    path = audit.profile("hang")
    rec = audit.launch(path)
    os.killpg(rec.pgid, signal.SIGSTOP)
    try:
        res = audit.cli("status", "--profile", str(path), "--json")
    finally:
        os.killpg(rec.pgid, signal.SIGCONT)
    state = json.loads(res.stdout)["run"]["state"] if res.stdout.strip().startswith("{") else res.stdout[:80]
    ok, note = audit.stopped_clean(path)
    return ok and rec.ready_at is not None and state != "starting", f"ready_at {rec.ready_at}; hung run reads {state!r}; {note}"


def supervise_full_disk(audit: Audit) -> tuple[bool, str]:
    """Item 14: ``supervise`` on a full state disk says the record was not updated at most
    every 30 s (it said it four times a second); watched 8 s of a real supervise."""
    mnt = _mount(audit, "full14", "size=4m,mode=0700")
    if isinstance(mnt, str):
        return False, f"not run here: {mnt}; tests/trust/test_full_disk.py injects ENOSPC instead"
    old = os.environ["SPECCONSOLE_STATE_DIR"]
    os.environ["SPECCONSOLE_STATE_DIR"] = str(mnt / "state")
    try:
        path = audit.profile("fullsup")
        rec = audit.launch(path, "--no-supervise")  # the lock free: the subject is this check's own supervise
        try:
            with open(mnt / "filler", "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
        except OSError:
            pass
        sup = _popen_cli(audit, "supervise", "--profile", str(path))
        time.sleep(2)
        os.killpg(rec.pgid, signal.SIGSTOP)  # health flips: the supervisor wants to record it
        time.sleep(3)
        os.killpg(rec.pgid, signal.SIGCONT)
        time.sleep(3)
        sup.send_signal(signal.SIGTERM)
        out = sup.communicate(timeout=30)[0] or ""
        said = sum("not updated" in line for line in out.splitlines())
        audit.cli("stop", "--profile", str(path))
        return 0 < said <= 2 or (
            said == 0 and "No space" in out
        ), f"'not updated' said {said} times in 8 s; {out.strip()[-120:]!r}"
    finally:
        os.environ["SPECCONSOLE_STATE_DIR"] = old
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def check_run_faults(audit: Audit) -> None:
    audit.check("fault", "r4.1 state fs read-only: supervise, stop", lambda: read_only_state(audit))
    for sig in (signal.SIGHUP, signal.SIGTERM):
        audit.check("fault", f"r4.2 stop interrupted by {sig.name}", partial(interrupted_stop, audit, sig))
    for field, value in (("pid", -1), ("pid", 0), ("pgid", 0)):
        audit.check("fault", f"r4.3 record {field}: {value}", partial(impossible_pid, audit, field, value))
    audit.check("fault", "r4.4 launch SIGKILLed once the record exists", lambda: launcher_killed_after_record(audit))
    audit.check("fault", "r4.4 keeper's reply pipe closed", lambda: keeper_reply_pipe_closed(audit))
    audit.check("fault", "r4.11 FATAL record read twice", lambda: fatal_read_twice(audit))
    audit.check("fault", "r4.14 ready_at, then the server hangs", lambda: ready_at_written(audit))
    audit.check("fault", "r4.14 supervise on a full disk", lambda: supervise_full_disk(audit))
