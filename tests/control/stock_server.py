"""A tiny stand-in for answers the simulator does not give (run as a real process):

  --mode stock    stock SGLang 0.5.23 (no dynamic speculation patch): /server_info without
                  the threshold key, /set_internal_state answers [false] and logs
                  "Updating <key> is not supported."
  --mode garbage  /server_info answers invalid JSON
  --mode hang     /server_info never answers within any sane timeout
  --mode metrics  stock answers, but no /v1/loads (404): load only from /metrics
  --mode noload   stock answers, neither /v1/loads nor /metrics: load only from the log
                  (it writes a Decode batch line every 0.1 s)
  --mode nogate   a server launched with the threshold (args show 5) whose scheduler never
                  loaded the patch: no init line in its log, the batch stays at 9 and the
                  polled mode stays speculative
  --mode typed    patched SGLang's HTTP typing: string values in /set_internal_state are
                  answered 422 (numbers only); the force mode goes as its index (0 auto,
                  1 speculative, 2 target_only) and reads back as its name
  --mode stalerank  typed, with TP 2 published per rank (dynamic_speculation.ranks) where
                  TP1 never takes a runtime change: SGLang answers from TP0 only ([true])
  --mode infinite  typed, TP 2 per rank, where TP1 publishes its threshold as JSON's
                  Infinity (a broken rank: Python's json reads it as float inf)
  --mode hostile  every string it controls carries terminal control sequences (HOSTILE:
                  CSI, OSC title, OSC 52 clipboard, OSC 8 hyperlink, DCS, C1): /server_info
                  (model path, version, modes, last switch), /v1/loads, its log lines, and
                  its refusal of /set_internal_state

Usage: python stock_server.py --port P --mode M [--max-lifetime S]; logs to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import signal
import sys
import threading

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


def log(msg: str) -> None:
    ts = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.buffer.write(f"[{ts}] {msg}\n".encode())  # whatever the locale
    sys.stdout.buffer.flush()


FORCE = ("auto", "speculative", "target_only")
# every kind of sequence a terminal acts on; what is left once they are removed is VISIBLE
HOSTILE = (
    "A\x1b[31mB\x1b]0;pwned-title\x07C\x1b]52;c;aGVsbG8=\x07D\x1b]8;;http://evil.example/\x1b\\E"
    "\x1b]8;;\x1b\\F\x1bP1$qm\x1b\\G\x9b31mH\x9d0;t\x9cI"
)
VISIBLE = "ABCDEFGHI"


async def _server_info(mode: str, state: dict):
    """/server_info as the mode answers it."""
    if mode == "garbage":
        return PlainTextResponse('{"internal_states": [ not json', media_type="application/json")
    if mode == "hang":
        await asyncio.sleep(3600)
    if mode == "nogate":
        return JSONResponse(
            {
                "model_path": "nogate-model",
                "tp_size": 1,
                "dp_size": 1,
                "speculative_disable_batch_threshold": 5,
                "internal_states": [
                    {
                        "speculative_disable_batch_threshold": 5,
                        "speculative_disable_min_dwell_steps": 10,
                        "speculative_disable_force_mode": "auto",
                        "dynamic_speculation": {"mode": "speculative", "switch_count": 0, "threshold": 5, "low_mark": 4},
                    }
                ],
            }
        )
    if mode == "typed":
        return JSONResponse(
            {"model_path": "typed-model", "speculative_disable_batch_threshold": 5, "internal_states": [dict(state)]}
        )
    if mode == "stalerank":
        ranks = [
            {
                "rank": r,
                "active": True,
                "threshold": state["speculative_disable_batch_threshold"] if r == 0 else 5,
                "force": "auto",
                "mode": "speculative",
            }
            for r in (0, 1)
        ]
        return JSONResponse(
            {
                "model_path": "stale-model",
                "tp_size": 2,
                "internal_states": [dict(state, dynamic_speculation={"mode": "speculative", "active": True, "ranks": ranks})],
            }
        )
    if mode == "infinite":
        n = state["speculative_disable_batch_threshold"]
        rank_rows = f'[{{"rank": 0, "active": true, "threshold": {n}}}, {{"rank": 1, "active": true, "threshold": Infinity}}]'
        entry = (
            f'{{"speculative_disable_batch_threshold": {n}, "speculative_disable_force_mode": "auto", '
            f'"dynamic_speculation": {{"mode": "speculative", "active": true, "ranks": {rank_rows}}}}}'
        )
        return PlainTextResponse(
            f'{{"model_path": "inf-model", "tp_size": 2, "internal_states": [{entry}]}}',
            media_type="application/json",
        )
    if mode == "hostile":
        return JSONResponse(
            {
                "model_path": f"model-{HOSTILE}",
                "version": f"v-{HOSTILE}",
                "tp_size": 1,
                "dp_size": 1,
                "speculative_algorithm": HOSTILE,
                "speculative_disable_batch_threshold": 5,
                "internal_states": [
                    {
                        "speculative_disable_batch_threshold": 5,
                        "speculative_disable_min_dwell_steps": 10,
                        "speculative_disable_force_mode": f"auto{HOSTILE}",
                        "dynamic_speculation": {
                            "mode": f"speculative{HOSTILE}",
                            "switch_count": 1,
                            "threshold": 5,
                            "low_mark": 4,
                            "last_switch": f"switched {HOSTILE}",
                        },
                    }
                ],
            }
        )
    return JSONResponse(
        {
            "model_path": "stock-model",
            "tp_size": 1,
            "dp_size": 1,
            "version": "0.5.23",
            "speculative_algorithm": "EAGLE3",
            "internal_states": [
                {"speculative_accept_threshold_single": 1.0, "last_gen_throughput": 12.5, "avg_spec_accept_length": 2.1}
            ],
        }
    )


def _set_internal_state(mode: str, state: dict, body: dict):
    """/set_internal_state as the mode answers it (``state``: what typed modes keep)."""
    if mode in ("typed", "stalerank", "infinite"):
        args = body.get("server_args") or {}
        if any(not isinstance(v, (int, float)) for v in args.values()):
            return JSONResponse({"detail": [{"msg": "Input should be a valid number"}]}, status_code=422)
        for key, value in args.items():
            state[key] = FORCE[int(value)] if key == "speculative_disable_force_mode" else int(value)
        return JSONResponse([True])
    for key, value in (body.get("server_args") or {}).items():
        if mode == "hostile":
            log(f"Dynamic speculation: refused {key}={value}: {HOSTILE}")
        else:
            log(f"Updating {key} is not supported.")
    return JSONResponse([False])


async def _decode_lines(mode: str):
    """The log lines of the modes that write some (noload: a Decode batch line every 0.1 s)."""
    if mode == "hostile":
        for _ in range(3):
            log(f"Prefill batch. #new-seq: 1, {HOSTILE}")
            log(f"Unterminated title \x1b]0;{HOSTILE}")
    while mode == "noload":
        log(
            "Decode batch, #running-req: 4, #token: 900, token usage: 0.02, accept len: 2.50, "
            "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 77.00, #queue-req: 1, "
        )
        await asyncio.sleep(0.1)


def build(mode: str) -> Starlette:
    state = {"speculative_disable_batch_threshold": 5, "speculative_disable_force_mode": "auto"}

    async def server_info(request: Request):
        return await _server_info(mode, state)

    async def loads(request: Request):
        if mode in ("metrics", "noload"):
            return PlainTextResponse("Not Found", status_code=404)
        return JSONResponse(
            {
                "timestamp": 0,
                "version": "0.5.23",
                "loads": [
                    {
                        "dp_rank": 0,
                        "num_running_reqs": 9 if mode == "nogate" else 3,
                        "num_waiting_reqs": 0,
                        "token_usage": 0.05,
                        "gen_throughput": 12.5,
                        "speculative": {"accept_length": 2.1, "accept_rate": 0.5},
                    }
                ],
            }
        )

    async def set_internal_state(request: Request):
        return _set_internal_state(mode, state, await request.json())

    async def metrics(request: Request):
        if mode != "metrics":
            return PlainTextResponse("Not Found", status_code=404)
        return PlainTextResponse(
            "# HELP sglang:num_running_reqs running\n# TYPE sglang:num_running_reqs gauge\n"
            'sglang:num_running_reqs{model_name="stock-model",tp_rank="0"} 9.0\n'
            "# HELP sglang:gen_throughput tput\n# TYPE sglang:gen_throughput gauge\n"
            'sglang:gen_throughput{model_name="stock-model",tp_rank="0"} 321.5\n',
            media_type="text/plain; version=0.0.4",
        )

    @contextlib.asynccontextmanager
    async def lifespan(app):
        task = asyncio.get_running_loop().create_task(_decode_lines(mode)) if mode in ("noload", "hostile") else None
        yield
        if task:
            task.cancel()

    return Starlette(
        lifespan=lifespan,
        routes=[
            Route("/server_info", server_info),
            Route("/v1/loads", loads),
            Route("/metrics", metrics),
            Route("/set_internal_state", set_internal_state, methods=["POST"]),
        ],
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument(
        "--mode",
        choices=("stock", "garbage", "hang", "typed", "metrics", "noload", "nogate", "stalerank", "infinite", "hostile"),
        default="stock",
    )
    p.add_argument("--max-lifetime", type=float, default=120.0)
    a = p.parse_args()
    timer = threading.Timer(a.max_lifetime, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.daemon = True
    timer.start()
    log("The server is fired up and ready to roll!")
    uvicorn.run(build(a.mode), host="127.0.0.1", port=a.port, log_level="warning")
    sys.exit(0)


if __name__ == "__main__":
    main()
