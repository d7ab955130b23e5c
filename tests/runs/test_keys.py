"""API keys reach the server through its environment, never its command line: `ps` on a
shared GPU host must not show them, and the spawned ranks must not inherit them."""

from __future__ import annotations

import httpx
import psutil

from server_control.config.profile import load_profile
from server_control.protocol.keys import API_KEY_ENV, take_key_flags
from server_control.supervision.supervisor import Supervisor

SECRET = "sk-test-4f1c"


def test_take_key_flags_pops_the_variables_and_keeps_explicit_flags():
    env = {API_KEY_ENV: "a", "SPECCONSOLE_ADMIN_API_KEY": "b", "OTHER": "x"}
    assert take_key_flags(["--port", "1"], env) == ["--port", "1", "--api-key", "a", "--admin-api-key", "b"]
    assert env == {"OTHER": "x"}
    env = {API_KEY_ENV: "from-env"}
    assert take_key_flags(["--api-key=given"], env) == ["--api-key=given"] and env == {}


async def test_launched_server_enforces_a_key_that_ps_never_shows(make_profile, groups, monkeypatch):
    path = make_profile(tp=2)
    path.write_text(path.read_text().replace('kind = "sim"\n', 'kind = "sim"\napi_key_env = "TEST_SIM_KEY"\n'))
    monkeypatch.setenv("TEST_SIM_KEY", SECRET)
    profile = load_profile(path)
    sup = Supervisor(profile)
    rec = await sup.launch()
    groups.add(rec.pgid)
    try:
        assert await sup.wait_ready(60), sup.last_error
        procs = [info.pid for info in sup.processes()]
        assert len(procs) >= 3  # the server and its two TP ranks
        for pid in procs:
            p = psutil.Process(pid)
            assert SECRET not in " ".join(p.cmdline())
            env = p.environ()
            assert "TEST_SIM_KEY" not in env  # the variable the profile names stays with us
            if pid != rec.pid:  # the ranks were spawned after the server took the key
                assert API_KEY_ENV not in env and SECRET not in env.values()
        url = f"http://127.0.0.1:{profile.port}/set_internal_state"
        body = {"server_args": {"speculative_disable_batch_threshold": 6}}
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.post(url, json=body)).status_code == 401
            ok = await client.post(url, json=body, headers={"Authorization": f"Bearer {SECRET}"})
            assert ok.status_code == 200 and ok.json() == [True]
    finally:
        res = await sup.stop(grace=5)
        assert res.ok, res.message
