"""A tiny stand-in for answers the simulator does not give (run as a real process):

  --mode stock    stock SGLang 0.5.23 (no dynamic speculation patch): /server_info without
                  the threshold key, /set_internal_state answers [false] and logs
                  "Updating <key> is not supported."
  --mode garbage  /server_info answers invalid JSON
  --mode hang     /server_info never answers within any sane timeout
  --mode typed    patched SGLang's HTTP typing: string values in /set_internal_state are
                  answered 422 (numbers only); the force mode goes as its index (0 auto,
                  1 speculative, 2 target_only) and reads back as its name

Usage: python stock_server.py --port P --mode M [--max-lifetime S]; logs to stdout.
"""
from __future__ import annotations

import argparse
import asyncio
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
    print(f"[{ts}] {msg}", flush=True)


FORCE = ("auto", "speculative", "target_only")


def build(mode: str) -> Starlette:
    state = {"speculative_disable_batch_threshold": 5, "speculative_disable_force_mode": "auto"}
    async def server_info(request: Request):
        if mode == "garbage":
            return PlainTextResponse('{"internal_states": [ not json', media_type="application/json")
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "typed":
            return JSONResponse({"model_path": "typed-model", "speculative_disable_batch_threshold": 5,
                                 "internal_states": [dict(state)]})
        return JSONResponse({"model_path": "stock-model", "tp_size": 1, "dp_size": 1, "version": "0.5.23",
                             "speculative_algorithm": "EAGLE3",
                             "internal_states": [{"speculative_accept_threshold_single": 1.0,
                                                  "last_gen_throughput": 12.5, "avg_spec_accept_length": 2.1}]})

    async def loads(request: Request):
        return JSONResponse({"timestamp": 0, "version": "0.5.23", "loads": [
            {"dp_rank": 0, "num_running_reqs": 3, "num_waiting_reqs": 0, "token_usage": 0.05,
             "gen_throughput": 12.5, "speculative": {"accept_length": 2.1, "accept_rate": 0.5}}]})

    async def set_internal_state(request: Request):
        body = await request.json()
        if mode == "typed":
            args = body.get("server_args") or {}
            if any(not isinstance(v, (int, float)) for v in args.values()):
                return JSONResponse({"detail": [{"msg": "Input should be a valid number"}]}, status_code=422)
            for key, value in args.items():
                state[key] = FORCE[int(value)] if key == "speculative_disable_force_mode" else int(value)
            return JSONResponse([True])
        for key in (body.get("server_args") or {}):
            log(f"Updating {key} is not supported.")
        return JSONResponse([False])

    return Starlette(routes=[Route("/server_info", server_info), Route("/v1/loads", loads),
                             Route("/set_internal_state", set_internal_state, methods=["POST"])])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=("stock", "garbage", "hang", "typed"), default="stock")
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
