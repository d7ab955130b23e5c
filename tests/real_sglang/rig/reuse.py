"""A running rig server handed to its next user as if just started (test rig only).

The tier shares one server per configuration across test modules (rig/pool.py,
tests/real_sglang/conftest.py). What a user may change on a patched server at runtime
(``/set_internal_state``: the threshold N, hysteresis, dwell, forced mode, cold-draft mark,
exploration share; a threshold also turns auto-tune off) is set back to the launch's values, the mode
back to speculative (a fresh server's), the radix cache flushed (no prefix of the last
user's requests stays cached); then ``/server_info`` must show exactly that on every rank,
or the hand-over fails. A plain server has no runtime state of the patch: its cache is
flushed.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from server_control.protocol import decision, explore

from . import switching as sw
from .pool import PATCHED_ARGS, Spec
from .server import RigServer

FLAGS = {
    decision.THRESHOLD_KEY: "--speculative-disable-batch-threshold",
    decision.HYSTERESIS_KEY: "--speculative-disable-hysteresis",
    decision.DWELL_KEY: "--speculative-disable-min-dwell-steps",
    explore.SHARE_KEY: "--speculative-disable-explore-share",
    decision.COLD_DRAFT_KEY: "--speculative-disable-cold-draft-above",
}
# the snapshot's name of each setting (/server_info internal_states[i]["dynamic_speculation"])
SNAPSHOT = {
    decision.THRESHOLD_KEY: "threshold",
    decision.HYSTERESIS_KEY: "hysteresis",
    decision.DWELL_KEY: "min_dwell_steps",
    decision.COLD_DRAFT_KEY: "cold_draft_above",
}
AUTO_TUNE_FLAG = "--speculative-disable-auto-tune"


def launch_settings(spec: Spec) -> dict:
    """The runtime settings ``spec`` starts with: PATCHED_ARGS, then its ``extra`` (the
    last flag wins, as on SGLang's command line); exploration off and the draft warm (the
    cold-draft mark 0) unless given."""
    argv = [*PATCHED_ARGS, *spec.extra]
    out: dict = {explore.SHARE_KEY: 0.0, decision.COLD_DRAFT_KEY: 0}
    for key, flag in FLAGS.items():
        for i, arg in enumerate(argv[:-1]):
            if arg == flag:
                out[key] = float(argv[i + 1]) if key == explore.SHARE_KEY else int(argv[i + 1])
    return out


def reset(server: RigServer, spec: Spec) -> None:
    """The runtime state back to ``spec``'s launch values, checked (raises otherwise)."""
    if spec.patched:
        assert AUTO_TUNE_FLAG not in spec.extra, "auto-tune's window cannot be reset: start its server anew"
        want = launch_settings(spec)
        res = server.request("/set_internal_state", {"server_args": want})
        assert res and all(x is True for x in res), f"reset {want} refused: {res}"
        back_to_speculative(server)
    _flush(server)
    if spec.patched:
        check(server, spec)


def back_to_speculative(server: RigServer) -> None:
    """Forced mode auto and the mode speculative, as on a fresh server: a server left
    target-only stays so while idle (no decode step, no decision), so when it is, one short
    request runs forced speculative first."""
    if any(s[decision.STATE_KEY]["mode"] != decision.SPECULATIVE for s in _states(server)):
        sw.force(server, decision.SPECULATIVE)
        sw.generate_ids(server, [[11, 12, 13, 14]], 4)
    sw.force(server, decision.AUTO)


def check(server: RigServer, spec: Spec) -> None:
    want = launch_settings(spec)
    assert server.skip_file is None or not server.skip_file.exists(), f"draft-extend still skipped: {server.skip_file}"
    for rank, state in enumerate(_states(server)):
        live = state[decision.STATE_KEY]
        got = {key: live[name] for key, name in SNAPSHOT.items()}
        got[explore.SHARE_KEY] = float(live[explore.SNAPSHOT_KEY]["share"])
        expected = {k: want[k] for k in got}
        assert got == expected, f"rank {rank}: runtime settings {got}, launched with {expected}"
        assert state[decision.THRESHOLD_KEY] == want[decision.THRESHOLD_KEY], (rank, state[decision.THRESHOLD_KEY])
        assert (live["force"], live["mode"]) == (decision.AUTO, decision.SPECULATIVE), (rank, live["force"], live["mode"])
        tune = live.get("auto_tune")
        assert not (isinstance(tune, dict) and tune.get("on")), f"rank {rank}: auto-tune on after the reset: {tune}"


def _states(server: RigServer) -> list[dict]:
    return server.request("/server_info")["internal_states"]


FLUSH_WAIT_S = 30


def _flush(server: RigServer) -> None:
    """SGLang's ``/flush_cache``, waiting (``timeout``, SGLang's own) up to FLUSH_WAIT_S for
    the server to be idle: it answers 400 while a batch is still running, and the last
    user's requests can have returned before the scheduler dropped their batch (a full run
    on 3 workers: 400 at the hand-over of random-plain-seeded, 11 s after its start)."""
    req = urllib.request.Request(f"{server.url}/flush_cache?timeout={FLUSH_WAIT_S}", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=FLUSH_WAIT_S + 30) as resp:
            assert resp.status == 200, resp.status
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"/flush_cache refused ({exc.code}): {exc.read()[:300]!r}") from None
