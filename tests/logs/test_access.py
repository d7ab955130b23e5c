"""Polling access lines: any client's successful reads of the read-only endpoints a console
polls are told apart from real traffic and from failures (which stay news)."""

from __future__ import annotations

import httpx
import pytest

from server_control.logs import parse_text
from server_control.logs.access import AccessLine, is_polling, parse_access
from tests.support.sim import start_sim

POLLING = [
    'INFO:     127.0.0.1:45566 - "GET /health HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:45580 - "GET /server_info HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:45580 - "GET /get_server_info HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:45580 - "GET /v1/loads?include=core,memory,spec HTTP/1.1" 200 OK',
    'INFO:     10.0.0.7:51000 - "GET /metrics HTTP/1.1" 200 OK',  # another client: Prometheus
    'INFO:     127.0.0.1:45566 - "GET /health_generate HTTP/1.1" 200 OK',
    '[2026-11-29 10:00:00] INFO:     127.0.0.1:45678 - "GET /health HTTP/1.1" 200 OK',  # behind a prefix
    'INFO:     127.0.0.1:45566 - "HEAD /health HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:50000 - "GET /v1/models/meta-llama/Llama-3.1-8B-Instruct HTTP/1.1" 200 OK',  # smg
    'INFO:     127.0.0.1:50000 - "GET /model_info HTTP/1.1" 200 OK',
]
NOT_POLLING = [
    'INFO:     127.0.0.1:45678 - "POST /v1/chat/completions HTTP/1.1" 200 OK',  # real traffic
    'INFO:     127.0.0.1:45678 - "POST /generate HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:45678 - "POST /set_internal_state HTTP/1.1" 200 OK',  # a change: news
    '[2026-11-29 10:00:00] INFO:     127.0.0.1:45678 - "GET /health HTTP/1.1" 503 Service Unavailable',
    'INFO:     127.0.0.1:45580 - "GET /v1/loads HTTP/1.1" 404 Not Found',  # a failure: news
    'INFO:     127.0.0.1:45580 - "GET /server_info HTTP/1.1" 500 Internal Server Error',
    "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: 10, gen throughput (token/s): 5.0",
    "GET /health is what the probe sends",  # prose, no request
]


@pytest.mark.parametrize("line", POLLING)
def test_polling_lines(line):
    assert is_polling(line)
    (rec,) = parse_text(line + "\n")
    assert rec.kind == "http" and is_polling(rec)


@pytest.mark.parametrize("line", NOT_POLLING)
def test_not_polling_lines(line):
    assert not is_polling(line)
    (rec,) = parse_text(line + "\n")
    assert not is_polling(rec)


def test_parse_access_fields():
    assert parse_access('INFO:     127.0.0.1:1 - "GET /v1/loads?include=core HTTP/1.1" 200 OK') == AccessLine(
        "GET", "/v1/loads", 200
    )
    assert parse_access("no request here") is None


def test_a_record_of_another_kind_is_never_polling():
    """A traceback that quotes an access line is not an access line."""
    (rec,) = parse_text(
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad "GET /health HTTP/1.1" 200 OK\n'
    )
    assert rec.kind == "traceback" and not is_polling(rec)


def test_real_simulator_log(tmp_path):
    """The simulator's own uvicorn access lines: polls are polling, a generate request is not."""
    with start_sim(tmp_path, tp=1) as sim:
        sim.wait_ready()
        with httpx.Client(timeout=10) as c:
            for path in ("/server_info", "/v1/loads?include=core,memory,spec", "/health", "/metrics"):
                c.get(sim.url + path)
            c.post(sim.url + "/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}})
        text = sim.wait_for_log('"POST /generate HTTP/1.1"', count=2)  # warm-up + ours
    recs = [r for r in parse_text(text) if r.kind == "http"]
    polls = [r for r in recs if is_polling(r)]
    assert {parse_access(r.raw).path for r in polls} >= {"/server_info", "/v1/loads", "/health"}
    assert all(parse_access(r.raw).path != "/generate" for r in polls)
    assert any(parse_access(r.raw).path == "/generate" for r in recs)
