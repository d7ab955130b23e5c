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
