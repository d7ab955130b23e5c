"""`specconsole demo` refuses options that do not apply, instead of ignoring them: the
fleet's ports are its own, and --keep belongs to the fleet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--fleet", "--port", "5000"], "--port is the single server's; the demo fleet takes free ports"),
        (["--keep"], "--keep is for --fleet"),
        (["--port", "70000"], "--port must be 1..65535, got 70000"),
    ],
)
def test_demo_refuses_what_does_not_apply(tmp_path, argv, said):
    res = subprocess.run(
        [sys.executable, "-m", "console", "demo", "--state-dir", str(tmp_path), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 2, (res.stdout[-2000:], res.stderr[-2000:])
    assert said in res.stderr
    assert not any(tmp_path.iterdir()), "nothing started or written"


def test_launch_demo_takes_the_port_given_and_refuses_a_bad_one(tmp_path):
    """Issue 35: `launch --demo` had no --port (it took 30000 when free)."""
    import json  # noqa: PLC0415

    from server_control.host.ports import free_port  # noqa: PLC0415

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-m", "console", *argv, "--state-dir", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )

    for bad in ("0", "70000", "x"):
        res = run("launch", "--demo", "--port", bad)
        assert res.returncode == 2 and "--port" in res.stderr, (bad, res.stderr)
    port = free_port()
    res = run("launch", "--demo", "--port", str(port), "--wait", "60", "--json")
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        assert json.loads(res.stdout)["run"]["port"] == port
        status = json.loads(run("status", "--demo", "--json").stdout)  # found where it runs, without --port
        assert status["url"] == f"http://127.0.0.1:{port}" and status["run"]["state"] == "ready"
        gpus = status["gpus"]  # the simulator's, read before the command answers (it said "N/A (not started)")
        assert gpus["available"] and len(gpus["devices"]) == 2 and gpus["devices"][0]["name"].endswith("(simulated)"), gpus
    finally:
        assert run("stop", "--demo").returncode == 0
