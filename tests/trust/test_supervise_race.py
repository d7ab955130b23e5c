"""Two `supervise` started together on a stopped profile (issue 22 item 10): the one that
loses the launch race adopts the winner's run and watches it (never exit 3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.support.sim import REPO_ROOT
from tests.support.trust import cli, port_of, run_pids


def test_two_supervise_at_once_one_supervises_the_other_watches(make_profile, state_dir, groups):
    outcomes = []
    for i in range(3):
        profile = make_profile(name=f"race{i}")
        go = threading.Barrier(2)
        procs: list[subprocess.Popen] = []
        lock = threading.Lock()

        def start(go=go, profile=profile, lock=lock, procs=procs) -> None:
            go.wait()
            p = subprocess.Popen(
                [sys.executable, "-m", "console", "supervise", "--profile", str(profile)],
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            with lock:
                procs.append(p)

        threads = [threading.Thread(target=start) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not run_pids(port_of(profile)):
                time.sleep(0.2)
            time.sleep(3)  # both are past their launch or adoption now
            exited = [p.poll() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            outs = []
            for p in procs:
                try:
                    outs.append(p.communicate(timeout=30)[0])
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    outs.append(p.communicate()[0])
            assert cli("stop", "--profile", str(profile)).returncode == 0
            assert not run_pids(port_of(profile))
        outcomes.append((exited, outs))
        assert exited == [None, None], f"a supervise ended (exit {exited}): {outs}"
        said = "\n".join(outs)
        assert said.count("launched race") == 1 and "Traceback" not in said, said
        assert "watching only" in said and "supervising (Ctrl-C" in said, said
