"""The routes SGLang's gateway (smg) probes, answered as SGLang 0.5.23 answers them, and a
real smg registering and monitoring a simulated worker."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest

from server_control.sim.catalog import GET_MODEL_INFO_DEPRECATED
from tests.support.sim import free_port, start_sim


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with start_sim(tmp_path_factory.mktemp("catalog"), "--sim-light", tp=2, lifetime=180) as handle:
        yield handle.wait_ready()


def test_model_info_and_its_deprecated_alias(sim):
    info = httpx.get(sim.url + "/model_info").json()
    assert info["model_path"] == "sim/Llama-3.1-8B-Instruct" and info["is_generation"] is True
    assert httpx.get(sim.url + "/get_model_info").json() == info
    sim.wait_for_log(GET_MODEL_INFO_DEPRECATED)


def test_models_list_and_one_model(sim):
    card = httpx.get(sim.url + "/v1/models").json()["data"][0]
    assert card["max_model_len"] == 8192 and card["owned_by"] == "sglang"
    assert httpx.get(f"{sim.url}/v1/models/{card['id']}").json() == card
    missing = httpx.get(sim.url + "/v1/models/other")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_flush_cache_when_idle(sim):
    resp = httpx.post(sim.url + "/flush_cache")
    assert resp.status_code == 200 and resp.text.startswith("Cache flushed.")
    sim.wait_for_log("Cache flushed successfully!")


def test_loads_sections_follow_include(sim):
    full = httpx.get(sim.url + "/v1/loads").json()
    assert {"timestamp", "version", "accelerator", "num_accelerators", "loads"} <= set(full)
    assert {"memory", "speculative", "queues"} <= set(full["loads"][0])
    core = httpx.get(sim.url + "/v1/loads", params={"include": "core"}).json()["loads"][0]
    assert not {"memory", "speculative", "queues"} & set(core)
    mixed = httpx.get(sim.url + "/v1/loads", params={"include": "core,disagg,queues,memory"}).json()["loads"][0]
    assert {"memory", "queues"} <= set(mixed) and "speculative" not in mixed
    bad = httpx.get(sim.url + "/v1/loads", params={"include": "core,bogus"})
    assert bad.status_code == 400 and "Invalid include sections" in bad.json()["detail"]
    assert httpx.get(sim.url + "/v1/loads", params={"dp_rank": "7"}).status_code == 400
    assert httpx.get(sim.url + "/v1/loads", params={"dp_rank": "x"}).status_code == 422


@pytest.mark.sglang
def test_load_keys_are_sglangs(sim):
    """Every core key and section name of SGLang 0.5.23's LoadSnapshot.to_dict is there."""
    from sglang.srt.managers.load_snapshot import _CORE_KEYS, LoadSnapshot

    load = httpx.get(sim.url + "/v1/loads", params={"include": "all"}).json()["loads"][0]
    assert set(_CORE_KEYS) <= set(load), set(_CORE_KEYS) - set(load)
    assert set(load) - set(_CORE_KEYS) <= {f for f in LoadSnapshot.__struct_fields__}


def _access_lines(log: str, since: int) -> list[tuple[str, str, int]]:
    """(method, path, status) of every uvicorn access line after offset ``since``."""
    return [(m[1], m[2], int(m[3])) for m in re.finditer(r'"(GET|POST|DELETE|PUT) (\S+) HTTP/1.1" (\d+)', log[since:])]


def test_smg_registers_and_monitors_a_simulated_worker(sim, tmp_path):
    """Every probe smg makes gets the answer SGLang gives: nothing it asks for is missing,
    except /loads, which SGLang 0.5.23 does not serve either."""
    before = len(sim.log_text())
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "smg",
        "launch",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--worker-urls",
        sim.url,
        "--policy",
        "round_robin",
        "--disable-tokenizer-autoload",
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(free_port()),
        "--shutdown-grace-period-secs",
        "1",
        "--log-level",
        "warn",
    ]
    log = open(tmp_path / "smg.log", "wb")
    proc = subprocess.Popen(
        ["timeout", "120", *argv], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        workers = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (workers and workers[0].get("status") == "ready"):
            time.sleep(0.2)
            try:
                workers = httpx.get(f"http://127.0.0.1:{port}/workers").json()["workers"]
            except (httpx.HTTPError, ValueError, KeyError):
                continue
        (worker,) = workers
        assert worker["is_healthy"] and worker["labels"]["version"] == "0.5.23"
        assert worker["labels"]["tp_size"] == "2" and worker["models"][0]["context_length"] == 8192
        done = httpx.post(
            f"http://127.0.0.1:{port}/v1/completions",
            timeout=30,
            json={"model": worker["model_id"], "prompt": "hi", "max_tokens": 4},
        )
        assert done.status_code == 200 and done.json()["usage"]["completion_tokens"] == 4
        # smg's load monitor asks on its own clock: wait for its first question
        sim.wait_for_log(
            "GET /v1/loads?include=core,disagg",
            timeout=30,
            count=sim.log_text()[:before].count("GET /v1/loads?include=core,disagg") + 1,
        )
        asked = _access_lines(sim.log_text(), before)
        paths = {p.split("?")[0] for _, p, _ in asked}
        assert {"/health", "/v1/models", "/server_info", "/model_info", "/v1/loads", "/v1/completions"} <= paths
        missing = [(m, p, s) for m, p, s in asked if s == 404 and not p.startswith("/loads?")]
        assert not missing, f"smg asked for routes the simulator lacks: {missing}"
        assert "/get_model_info" not in paths  # /model_info answered: no deprecated fallback
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
