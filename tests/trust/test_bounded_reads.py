"""Every answer a control-plane client reads is capped (a few MB: "answer too large") and
every request has an overall deadline: real hostile HTTP servers on loopback, the real CLI
as a process (its peak memory from wait4), the real ssh client against the test sshd."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from server_control.control.settings import Control
from server_control.fleet.spec import MemberSpec
from server_control.fleet.ssh import MAX_OUTPUT_BYTES, TOO_LARGE, SshHost
from server_control.net.http import MAX_BODY_BYTES
from server_control.protocol.runtime_settings import THRESHOLD
from server_control.telemetry.http_poll import HttpPoller
from tests.fleet.conftest import sshd  # noqa: F401 (fixture)
from tests.support.sim import REPO_ROOT

RSS_LIMIT_KB = 400_000  # the CLI itself takes ~100 MB; an uncapped body took GBs


_MEASURE = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n"
)


def run_cli(*args: str, timeout_s: float = 60) -> tuple[int, str, int, float]:
    """(exit code, output, peak RSS in KB from wait4, seconds) of ``python -m console ARGS``."""
    t0 = time.monotonic()
    # The CLI runs as the child of a small interpreter, whose wait4 gives its peak RSS: a child
    # forked by pytest itself inherits pytest's high-water mark (1.5 GB after the real-SGLang tests).
    rss_file = tempfile.NamedTemporaryFile(prefix="peak-rss-", delete=False)
    rss_file.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, rss_file.name, sys.executable, "-m", "console", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    timer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, 9))
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    reader.join(10)
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = b"".join(out).decode("utf-8", "replace")
    if proc.returncode == -9:
        pytest.fail(f"`specconsole {' '.join(args)}` still running after {timeout_s} s: {text[-2000:]}")
    try:
        peak = int(Path(rss_file.name).read_text() or usage.ru_maxrss)
    finally:
        os.unlink(rss_file.name)
    return proc.returncode, text, peak, time.monotonic() - t0


@pytest.mark.parametrize("mode", ["endless", "declared"])
def test_threshold_against_a_body_without_end_says_answer_too_large(hostile, mode):
    url = hostile(mode)
    rc, out, rss_kb, took = run_cli("threshold", "8", "--url", url, timeout_s=60)
    assert rc == 1, out
    assert "answer too large" in out, out
    assert rss_kb < RSS_LIMIT_KB, f"peak RSS {rss_kb} KB"
    assert took < 45


def test_status_against_a_body_without_end_says_answer_too_large(hostile):
    url = hostile("endless")
    rc, out, rss_kb, _ = run_cli("status", "--url", url, timeout_s=60)
    assert "answer too large" in out and "not polled yet" not in out, out
    assert rss_kb < RSS_LIMIT_KB, f"peak RSS {rss_kb} KB"


async def test_a_trickling_server_meets_the_overall_deadline(hostile):
    url = hostile("trickle")
    poller = HttpPoller(url, timeout_s=0.5)  # each byte comes within the read timeout
    t0 = time.monotonic()
    try:
        sample = await poller.poll_once()
    finally:
        await poller.aclose()
    took = time.monotonic() - t0
    assert not sample.reachable and "timed out" in (sample.error or ""), sample.error
    assert took < 5, f"took {took:.1f} s"
    control = Control(url, timeout_s=0.5)
    t0 = time.monotonic()
    try:
        res = await control.set_setting(THRESHOLD.key, 8)
    finally:
        await control.aclose()
    assert res.state == "error" and "timed out" in res.detail
    assert time.monotonic() - t0 < 5


async def test_poller_caps_the_body(hostile):
    poller = HttpPoller(hostile("endless"), timeout_s=5)
    try:
        sample = await asyncio.wait_for(poller.poll_once(), 30)
    finally:
        await poller.aclose()
    assert not sample.reachable
    assert f"answer too large (over {MAX_BODY_BYTES} bytes)" in (sample.error or "")


@pytest.mark.ssh
async def test_ssh_output_without_end_is_capped(sshd, tmp_path):
    """A remote command that prints without end (`yes`): ended, "answer too large"."""
    member = MemberSpec(
        name="r", kind="ssh", profile_ref="demo", host=sshd.host, ssh_options=tuple(sshd.ssh_options), command=("yes",)
    )
    host = SshHost(member, multiplex=False)
    t0 = time.monotonic()
    res = await host.run("status", timeout_s=60)
    await host.close()
    assert res.rc == TOO_LARGE and res.no_answer
    assert "answer too large" in res.why()
    assert len(res.stdout) <= MAX_OUTPUT_BYTES
    assert time.monotonic() - t0 < 30


def test_advice_reads_meet_the_overall_deadline(hostile):
    """``advise`` (and the tuner and the fleet's advice line, which use the same reader from a
    thread) read /server_info with a per-read timeout only: a trickling server kept them
    reading forever."""
    from server_control.advice.source import SourceError, read_server

    url = hostile("trickle")
    t0 = time.monotonic()
    with pytest.raises(SourceError, match="timed out"):
        read_server(url, timeout_s=0.5)
    assert time.monotonic() - t0 < 5
