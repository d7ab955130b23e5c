"""Two launches of one profile at the same instant: exactly one launches, the other is
refused, and no server runs that the run record does not know about.

Two long-lived worker processes (real, separate interpreters) launch the same profile
behind a barrier, PAIRS times. After each pair the test counts this profile's servers (every
simulator process whose command line carries the profile's port and whose working directory
is the profile's: the profile sets both) that are not processes of the recorded run, then
stops the run and kills any such stray by its own process group.

Only this test's servers are counted and killed: in a parallel run another worker's simulator
may carry the same port number (a free port is free only when it is taken). A decoy, a
process with the same command-line words started elsewhere, runs through the whole test and
must be neither counted nor killed.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal

import psutil

from server_control.host import identity
from server_control.state import runs
from tests.support.trust import lookalike

PAIRS = 50


def _worker(profile_path: str, state_dir: str, barrier, results, rounds: int) -> None:
    os.environ["SPECCONSOLE_STATE_DIR"] = state_dir
    from server_control.config.profile import load_profile
    from server_control.state.runs import RunConflict
    from server_control.supervision.supervisor import Supervisor

    profile = load_profile(profile_path)
    for _ in range(rounds):
        barrier.wait()

        async def once():
            try:
                rec = await Supervisor(profile).launch()
                return ("launched", rec.pid)
            except RunConflict:
                return ("refused", None)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                return ("error", f"{type(exc).__name__}: {exc}")

        results.put(asyncio.run(once()))
        barrier.wait()  # the test checks and stops the run


def _servers_on(port: int, cwd: str) -> list[psutil.Process]:
    """The simulators on ``port`` started from ``cwd`` (the profile's directory)."""
    out = []
    flag = ["--port", str(port)]
    for p in psutil.process_iter(["cmdline", "cwd"]):
        cmd = p.info["cmdline"] or []
        if any(cmd[i : i + 2] == flag for i in range(len(cmd) - 1)) and "server_control.sim" in cmd and p.info["cwd"] == cwd:
            out.append(p)
    return out


def _described(p: psutil.Process, rec) -> str:
    """What a stray is, beside the record's leader, so that a failure says which process it was."""
    try:
        with p.oneshot():
            me = f"pid {p.pid} ppid {p.ppid()} pgid {os.getpgid(p.pid)} started {p.create_time():.2f} {p.status()}"
    except (psutil.Error, OSError) as exc:
        me = f"pid {p.pid}: {type(exc).__name__}"
    leader = f"record: leader {rec.pid} started {rec.create_time:.2f}, members {list(rec.members)}" if rec else "no record"
    return f"{me}; {leader}"


def test_synchronised_launch_pairs_give_one_run_and_no_stray(make_profile, groups, state_dir):
    path = make_profile("race", tp=1, grace=2.0)
    port = int(path.read_text().split("port = ")[1].split()[0])
    decoy = lookalike(port, cwd=path.parent.parent)  # another worker's server on the same port number
    groups.add(decoy.pid)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(str(path), str(state_dir), barrier, results, PAIRS), daemon=True) for _ in range(2)
    ]
    for w in workers:
        w.start()
    tally: dict = {"double launch": 0, "untracked servers": 0, "errors": []}
    try:
        for _ in range(PAIRS):
            barrier.wait(timeout=120)
            got = [results.get(timeout=120) for _ in range(2)]
            kinds = sorted(k for k, _ in got)
            tally["errors"] += [v for k, v in got if k == "error"]
            if kinds.count("launched") != 1:
                tally["double launch"] += 1
            rec = runs.load_record("race")
            tracked = {p.pid for p in identity.run_processes(rec.identity())} if rec else set()
            stray = [p for p in _servers_on(port, str(path.parent)) if p.pid not in tracked]
            tally["untracked servers"] += len(stray)
            tally["errors"] += [f"untracked: {_described(p, rec)}" for p in stray]
            for p in stray:
                groups.add(os.getpgid(p.pid))
                os.killpg(os.getpgid(p.pid), signal.SIGKILL)
            if rec is not None:
                groups.add(rec.pgid)
                from server_control.config.profile import load_profile
                from server_control.supervision.supervisor import Supervisor

                sup = Supervisor(load_profile(path))
                sup.adopt()
                res = asyncio.run(sup.stop(grace=2.0))
                assert res.ok, res.message
            barrier.wait(timeout=120)
    finally:
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
    assert decoy.poll() is None, "the test killed a process that is not its own"
    decoy.kill()
    decoy.wait(timeout=10)
    assert tally == {"double launch": 0, "untracked servers": 0, "errors": []}, tally
