"""HTTP shapes and status codes against SGLang 0.5.23's documented ones."""

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_control.protocol import decision
from tests.support.sim import start_sim

UNKNOWN = ("--enable-torch-compile", "--cuda-graph-max-bs-decode", "16")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    handle = start_sim(tmp_path_factory.mktemp("sim"), "--enable-metrics", *UNKNOWN)
    try:
        yield handle.wait_ready()
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    handle = start_sim(
        tmp_path_factory.mktemp("keyed"), "--api-key", "user-key", "--admin-api-key", "admin-key", "--dp-size", "2", tp=1
    )
    try:
        yield handle.wait_ready()
    finally:
        handle.stop()


def sse(response) -> list:
    events = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[6:]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_health_endpoints(sim):
    for path in ("/health", "/health_generate"):
        r = httpx.get(sim.url + path, timeout=30)
        assert r.status_code == 200 and r.content == b""
    assert httpx.get(sim.url + "/ready").json() == {"status": "ready"}


def test_server_info_flat_args_and_internal_states(sim):
    info = httpx.get(sim.url + "/server_info").json()
    assert info["version"] == "0.5.23"
    assert info["tp_size"] == 2 and info["speculative_algorithm"] == "EAGLE3"
    assert info[decision.THRESHOLD_KEY] == 5
    assert "server_control.sim" in info["launch_command"]
    (state,) = info["internal_states"]
    for key in (
        decision.THRESHOLD_KEY,
        decision.HYSTERESIS_KEY,
        decision.DWELL_KEY,
        decision.FORCE_KEY,
        "last_gen_throughput",
        "avg_spec_accept_length",
        "memory_usage",
    ):
        assert key in state
    live = state[decision.STATE_KEY]
    assert live["mode"] in decision.MODES and live["enabled"] is True
    assert set(live["steps"]) == set(decision.MODES)
    assert (
        httpx.get(sim.url + "/get_server_info").json()["internal_states"][0][decision.THRESHOLD_KEY]
        == state[decision.THRESHOLD_KEY]
    )


def test_set_internal_state_applies_refuses_and_logs_on_every_rank(sim):
    url = sim.url + "/set_internal_state"
    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: 8}}).json() == [True]
    state = httpx.get(sim.url + "/server_info").json()["internal_states"][0]
    assert state[decision.THRESHOLD_KEY] == 8 and state[decision.STATE_KEY]["low_mark"] == 7
    log = sim.wait_for_log("threshold changed 5 -> 8 (resume_at<=7)", count=2)
    assert "TP0] Dynamic speculation: threshold changed 5 -> 8" in log
    assert "TP1] Dynamic speculation: threshold changed 5 -> 8" in log

    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: -1}}).json() == [False]
    sim.wait_for_log(f"Dynamic speculation: refused {decision.THRESHOLD_KEY}=-1: ")
    assert httpx.post(url, json={"server_args": {"no_such_knob": 1}}).json() == [False]
    sim.wait_for_log("Updating no_such_knob is not supported.")
    assert httpx.get(sim.url + "/server_info").json()[decision.THRESHOLD_KEY] == 5  # launch value
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.THRESHOLD_KEY] == 8
    assert httpx.post(url, content=b"{not json").status_code == 400
    assert httpx.post(url, json={"threshold": 3}).status_code == 400
    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: "6"}}).status_code == 422
    assert httpx.post(url, json={"server_args": {decision.THRESHOLD_KEY: 5}}).json() == [True]


def test_force_mode_by_index_as_sglang_types_values_as_numbers(sim):
    url = sim.url + "/set_internal_state"
    assert httpx.post(url, json={"server_args": {decision.FORCE_KEY: "target_only"}}).status_code == 422
    code = decision.FORCE_CHOICES.index(decision.TARGET_ONLY)
    assert httpx.post(url, json={"server_args": {decision.FORCE_KEY: code}}).json() == [True]
    httpx.post(sim.url + "/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 3}}, timeout=30)
    state = httpx.get(sim.url + "/server_info").json()["internal_states"][0]
    assert state[decision.FORCE_KEY] == decision.TARGET_ONLY
    assert state[decision.STATE_KEY]["mode"] == decision.TARGET_ONLY
    sim.wait_for_log("Dynamic speculation: switched to target-only (forced)", count=2)
    assert httpx.post(url, json={"server_args": {decision.FORCE_KEY: 0}}).json() == [True]
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.FORCE_KEY] == decision.AUTO


def test_loads_shape(sim):
    body = httpx.get(sim.url + "/v1/loads").json()
    assert {"timestamp", "version", "loads"} <= set(body)
    (load,) = body["loads"]
    for key in ("dp_rank", "num_running_reqs", "num_waiting_reqs", "token_usage", "gen_throughput"):
        assert key in load
    assert set(load["speculative"]) >= {"accept_length", "accept_rate"}
    text = httpx.get(sim.url + "/v1/loads", params={"format": "prometheus"}).text
    assert 'sglang:num_running_reqs{dp_rank="0"}' in text


def test_metrics_are_prometheus_text_with_sglang_names(sim):
    httpx.post(sim.url + "/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 3}}, timeout=30)
    text = httpx.get(sim.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:spec_disable_batch_threshold",
        "sglang:generation_tokens",
    ):
        assert name in families, name
    sample = families["sglang:num_running_reqs"].samples[0]
    assert sample.labels["model_name"] == "sim/Llama-3.1-8B-Instruct" and sample.labels["tp_rank"] == "0"
    assert families["sglang:generation_tokens"].samples[0].value >= 3


def test_generate_native_plain_and_stream(sim):
    r = httpx.post(
        sim.url + "/generate", json={"text": "hello there", "sampling_params": {"max_new_tokens": 6}}, timeout=30
    ).json()
    assert r["meta_info"]["completion_tokens"] == 6 and r["text"]
    assert {"spec_accept_length", "spec_verify_ct", "prompt_tokens", "finish_reason"} <= set(r["meta_info"])
    with httpx.stream(
        "POST", sim.url + "/generate", timeout=30, json={"text": "hi", "stream": True, "sampling_params": {"max_new_tokens": 9}}
    ) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse(resp)
    assert events[-1] == "[DONE]"
    assert events[-2]["meta_info"]["completion_tokens"] == 9
    assert len(events[-2]["text"].split()) == 9


def test_openai_completions_and_chat(sim):
    r = httpx.post(sim.url + "/v1/completions", json={"model": "m", "prompt": "p", "max_tokens": 5}, timeout=30)
    body = r.json()
    assert body["object"] == "text_completion" and body["usage"]["completion_tokens"] == 5
    assert body["choices"][0]["finish_reason"] == "length"
    chat = httpx.post(
        sim.url + "/v1/chat/completions", timeout=30, json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    ).json()
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
    with httpx.stream(
        "POST",
        sim.url + "/v1/chat/completions",
        timeout=30,
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 7,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ) as resp:
        events = sse(resp)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] == 7
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-2])
    assert len(text.split()) == 7
    with httpx.stream(
        "POST", sim.url + "/v1/completions", timeout=30, json={"prompt": "p", "max_tokens": 3, "stream": True}
    ) as resp:
        events = sse(resp)
    assert events[-2]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/completions", {"prompt": "p", "max_tokens": -1}),
        ("/v1/completions", {"max_tokens": 3}),
        ("/v1/chat/completions", {"messages": "hi"}),
        ("/generate", {"sampling_params": {"max_new_tokens": 2}}),
    ],
)
def test_bad_requests_get_400_naming_the_problem(sim, path, body):
    r = httpx.post(sim.url + path, json=body, timeout=30)
    assert r.status_code == 400
    assert r.json()["object"] == "error" and r.json()["message"]


def test_unknown_flags_warned_once(sim):
    log = sim.wait_for_log("The server is fired up and ready to roll!")
    warnings = [line for line in log.splitlines() if "ignores unrecognized arguments" in line]
    assert len(warnings) == 1 and "--enable-torch-compile" in warnings[0]


def test_api_keys_are_enforced(keyed):
    url = keyed.url
    user = {"Authorization": "Bearer user-key"}
    admin = {"Authorization": "Bearer admin-key"}
    body = {"prompt": "p", "max_tokens": 2}
    assert httpx.post(url + "/v1/completions", json=body, timeout=30).status_code == 401
    assert httpx.post(url + "/v1/completions", json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.post(url + "/v1/completions", json=body, headers=user, timeout=30).status_code == 200
    assert httpx.get(url + "/server_info").status_code == 401
    assert httpx.get(url + "/health").status_code == 200
    state = {"server_args": {decision.THRESHOLD_KEY: 7}}
    assert httpx.post(url + "/set_internal_state", json=state, headers=user).status_code == 401
    assert httpx.post(url + "/set_internal_state", json=state, headers=admin).json() == [True, True]
    info = httpx.get(url + "/server_info", headers=user).json()
    assert [s[decision.THRESHOLD_KEY] for s in info["internal_states"]] == [7, 7]
    assert info["api_key"] == "<redacted>"


def test_metrics_absent_without_enable_metrics(keyed):
    assert httpx.get(keyed.url + "/metrics").status_code == 404
