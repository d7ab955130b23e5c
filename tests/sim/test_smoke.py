import httpx


def test_ready_simulator_answers_health_and_generate(sim):
    assert httpx.get(sim.url + "/health").status_code == 200
    r = httpx.post(sim.url + "/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 4}}, timeout=30)
    assert r.status_code == 200
    assert r.json()["meta_info"]["completion_tokens"] == 4
    log = sim.wait_for_log("The server is fired up and ready to roll!")
    assert "speculative_disable_batch_threshold=5" in log
    assert sim.stop() is not None
    assert not sim.group_alive()
