"""console/exit_watchdog.py in a child process: armed, it runs the hand-off once and ends the
process after its grace even though the main thread is stuck; disarmed in time, nothing
happens; ``Once`` runs its function once from racing threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from console.exit_watchdog import Once
from tests.support.tmux import REPO

CHILD = textwrap.dedent(
    """
    import sys, threading, time
    sys.path.insert(0, {repo!r})
    from console.exit_watchdog import ExitWatchdog, Once
    finish = Once(lambda: print("handed off", flush=True))
    dog = ExitWatchdog(finish, grace_s=0.3)
    dog.arm()
    if {disarm}:
        dog.disarm()
        time.sleep(1.0)
        print("still here", flush=True)
        finish()
        sys.exit(3)
    threading.Event().wait()  # the main thread stuck for ever (Textual's shutdown on a dead terminal)
    """
)


AFTER_RETURN = textwrap.dedent(
    """
    import sys, threading
    sys.path.insert(0, {repo!r})
    from console.exit_watchdog import ExitWatchdog
    dog = ExitWatchdog(grace_s=0.3)
    dog.arm()  # the terminal went away
    threading.Thread(target=lambda: threading.Event().wait()).start()  # a non-daemon thread that never ends
    dog.{end}()  # the command returned; Python's shutdown now joins that thread
    print("returned", flush=True)
    """
)


def test_a_hung_up_console_ends_even_when_python_s_shutdown_blocks_on_a_thread():
    """Found as orphaned consoles after `tmux kill-server`: the command returned, Python's
    shutdown joined Textual's input thread spinning on the dead terminal, and the watchdog had
    been disarmed by the return. ``finished()`` keeps it armed: the process ends in the grace.
    Negative control: ``disarm()`` there, the process never ends."""
    r = subprocess.run(
        [sys.executable, "-c", AFTER_RETURN.format(repo=str(REPO), end="finished")], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0 and r.stdout == "returned\n" and "ended" in r.stderr, (r.stdout, r.stderr)
    stuck = subprocess.Popen(
        [sys.executable, "-c", AFTER_RETURN.format(repo=str(REPO), end="disarm")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stuck.wait(timeout=3) is None, "the negative control ended on its own"
    except subprocess.TimeoutExpired:
        pass  # still there: the hang, as found
    finally:
        stuck.kill()
        stuck.wait(timeout=10)


def _child(disarm: bool) -> subprocess.CompletedProcess:
    code = CHILD.format(repo=str(REPO), disarm=disarm)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)


def test_armed_it_hands_off_once_and_ends_a_stuck_process():
    r = _child(disarm=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "handed off\n"
    assert "did not close within 0.3 s: ended" in r.stderr


def test_disarmed_within_the_grace_it_does_nothing():
    r = _child(disarm=True)
    assert r.returncode == 3 and r.stdout == "still here\nhanded off\n", (r.stdout, r.stderr)
    assert "ended" not in r.stderr


def test_once_runs_its_function_once_from_racing_threads():
    calls = []
    gate = threading.Barrier(8)

    def work():
        calls.append(1)
        return len(calls)

    once = Once(work)
    results = []

    def racer():
        gate.wait()
        results.append(once())

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert calls == [1] and results == [1] * 8
