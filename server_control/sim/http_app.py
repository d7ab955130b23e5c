"""The HTTP surface of SGLang 0.5.23 as the simulator serves it (Starlette)."""

from __future__ import annotations

import argparse
import asyncio
import hmac
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from server_control.protocol import decision, runtime_settings
from server_control.protocol import sim_gpus as sim_gpus_wire
from server_control.protocol.sglang_version import SGLANG_VERSION
from server_control.sim import args as simargs
from server_control.sim import catalog
from server_control.sim.generation import BadRequest, Generator, error_response, read_json
from server_control.sim.gpus import SimGpus
from server_control.sim.metrics import Metrics

if TYPE_CHECKING:
    from server_control.sim.logfmt import Logger
    from server_control.sim.scheduler import Scheduler


Handler = Callable[[Request], Awaitable[Response]]

NORMAL, ADMIN_OPTIONAL = "normal", "admin_optional"
UNAUTHENTICATED_PATHS = ("/health", "/health_generate", "/metrics", "/ready")


class AppState:
    def __init__(self, args: argparse.Namespace, scheduler: Scheduler, log: Logger, launch_command: str) -> None:
        self.args = args
        self.scheduler = scheduler
        self.log = log
        self.launch_command = launch_command
        self.ready = False
        self.model_name = args.served_model_name or args.model_path
        self.started = time.time()
        self.rng = random.Random(args.sim_seed + 1)
        self.metrics = Metrics(self)
        self.generator = Generator(self)

    def health_failing(self) -> bool:
        at = self.args.sim_health_fail_after
        return self.ready and at is not None and self.scheduler.serving_seconds() >= at

    def internal_state(self) -> dict[str, Any]:
        sched = self.scheduler
        snap = sched.snapshot_switch()
        live = snap if snap and "threshold" in snap else None
        a = self.args
        entry = {s.key: live[s.field] if live else getattr(a, s.key) for s in runtime_settings.SETTINGS}
        entry |= {
            decision.STATE_KEY: snap,
            "last_gen_throughput": round(sched.stats.gen_throughput, 4),
            "avg_spec_accept_length": round(sched.avg_spec_accept_length, 4),
            "memory_usage": {"weight": 8.19, "kvcache": 32.0, "token_capacity": a.max_total_tokens, "graph": 1.02},
            "effective_max_running_requests_per_dp": a.max_running_requests,
        }
        return entry


def _bearer(request: Request) -> str | None:
    value = str(request.headers.get("authorization", ""))
    if value.lower().startswith("bearer "):
        return value[7:].strip()
    return None


def _allowed(state: AppState, request: Request, level: str) -> bool:
    a = state.args
    token = _bearer(request)

    def same(key: str) -> bool:
        return token is not None and hmac.compare_digest(token, str(key))

    if level == ADMIN_OPTIONAL and a.admin_api_key:
        return same(a.admin_api_key)
    if a.api_key:
        return same(a.api_key) or bool(a.admin_api_key and same(a.admin_api_key))
    return True


def route(state: AppState, path: str, fn: Handler, methods: tuple[str, ...] = ("GET",), level: str = NORMAL) -> Route:
    async def endpoint(request: Request) -> Response:
        if path not in UNAUTHENTICATED_PATHS and not _allowed(state, request, level):
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        try:
            return await fn(request)
        except BadRequest as exc:
            return error_response(400, str(exc))

    return Route(path, endpoint, methods=list(methods))


def build_app(state: AppState) -> Starlette:
    return Starlette(
        routes=[
            *_health_routes(state),
            *_state_routes(state),
            *catalog.routes(state, route),
            *_generation_routes(state),
            *_sim_routes(state),
        ]
    )


def _health_routes(state: AppState) -> list[Route]:
    """/health, /health_generate, /ready (with the simulated faults: failing, hanging)."""
    sched = state.scheduler
    a = state.args

    async def health(request: Request) -> Response:
        if state.health_failing():
            if a.sim_health_fail_mode == "hang":
                await asyncio.Event().wait()
            return Response(status_code=503)
        return Response(status_code=200 if state.ready else 503)

    async def health_generate(request: Request) -> Response:
        if not state.ready or state.health_failing():
            return await health(request)
        req = sched.new_request(1, 1)
        try:
            await asyncio.wait_for(state.generator._drain(req), timeout=20)
        except TimeoutError:
            return Response(status_code=503)
        return Response(status_code=200)

    async def ready(request: Request) -> Response:
        ok = state.ready and not state.health_failing()
        return JSONResponse({"status": "ready" if ok else "not ready"}, status_code=200 if ok else 503)

    return [route(state, "/health", health), route(state, "/health_generate", health_generate), route(state, "/ready", ready)]


def _state_routes(state: AppState) -> list[Route]:
    """/server_info, /set_internal_state, /v1/loads, /metrics."""
    sched = state.scheduler
    a = state.args

    async def server_info(request: Request) -> Response:
        info = simargs.flat_server_args(a)
        info.update(
            {
                "launch_command": state.launch_command,
                "version": SGLANG_VERSION,
                "internal_states": [state.internal_state() for _ in range(a.dp_size)],
            }
        )
        return JSONResponse(info)

    async def set_internal_state(request: Request) -> Response:
        body = await read_json(request)
        updates = body.get("server_args")
        if not isinstance(updates, dict) or not updates:
            raise BadRequest('body must be {"server_args": {"key": value, ...}}')
        bad = [
            {"type": "float_type", "loc": ["body", "server_args", str(k)], "msg": "Input should be a valid number", "input": v}
            for k, v in updates.items()
            if isinstance(v, bool) or not isinstance(v, (int, float))
        ]
        if bad:  # SGLang's request model types these values as numbers: 422 before any rank
            return JSONResponse({"detail": bad}, status_code=422)
        ok = True
        for key, value in updates.items():
            fut = sched.apply_setting(str(key), value)
            applied, _text = await asyncio.wrap_future(fut)
            ok = ok and applied
        return JSONResponse([ok] * a.dp_size)

    async def loads(request: Request) -> Response:
        raw_rank = request.query_params.get("dp_rank")
        if raw_rank is not None and not raw_rank.isdigit():  # FastAPI's typed query parameter
            return JSONResponse(
                {
                    "detail": [
                        {
                            "type": "int_parsing",
                            "loc": ["query", "dp_rank"],
                            "msg": "Input should be a valid integer",
                            "input": raw_rank,
                        }
                    ]
                },
                status_code=422,
            )
        dp_rank = int(raw_rank) if raw_rank is not None else None
        try:
            include = catalog.parse_include(request.query_params.get("include"))
            if dp_rank is not None and dp_rank >= a.dp_size:
                raise ValueError(f"dp_rank {dp_rank} out of range (dp_size {a.dp_size})")
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        body = catalog.loads_body(state, include, dp_rank)
        if request.query_params.get("format") == "prometheus":
            return PlainTextResponse(state.metrics.loads_text(body["loads"]))
        return JSONResponse(body)

    async def metrics(request: Request) -> Response:
        if not a.enable_metrics:
            return PlainTextResponse("Not Found", status_code=404)
        body, ctype = state.metrics.render()
        return Response(body, media_type=ctype)

    return [
        route(state, "/server_info", server_info),
        route(state, "/get_server_info", server_info),
        route(state, "/set_internal_state", set_internal_state, ("POST",), ADMIN_OPTIONAL),
        route(state, "/v1/loads", loads),
        route(state, "/metrics", metrics),
    ]


def _generation_routes(state: AppState) -> list[Route]:
    """/generate, /v1/completions, /v1/chat/completions (with the simulated 5xx)."""
    a = state.args

    def generation(chat: bool | None) -> Handler:
        async def handler(request: Request) -> Response:
            if not state.ready:
                return error_response(503, "The server is not ready yet.", "ServiceUnavailableError")
            if a.sim_http_5xx_rate and state.rng.random() < a.sim_http_5xx_rate:
                return error_response(500, "Internal server error (simulated by --sim-http-5xx-rate)", "InternalServerError")
            body = await read_json(request)
            if chat is None:
                return await state.generator.generate(body)
            return await state.generator.openai(body, chat)

        return handler

    return [
        route(state, "/generate", generation(None), ("POST",)),
        route(state, "/v1/completions", generation(False), ("POST",)),
        route(state, "/v1/chat/completions", generation(True), ("POST",)),
    ]


def _sim_routes(state: AppState) -> list[Route]:
    """/sim/stats: the simulator's own counters (tests, benchmarks); /sim/gpus: its GPUs
    (server_control/protocol/sim_gpus.py), which the demo's GPU panel shows."""
    sched = state.scheduler
    a = state.args

    async def sim_stats(request: Request) -> Response:
        timing = sched.timing.summary()
        if request.query_params.get("reset"):
            sched.timing.reset()
        return JSONResponse(
            {
                "step_timing": timing,
                "steps": sched.stats.steps,
                "time_scale": a.sim_time_scale,
                "seed": a.sim_seed,
                "serving_seconds": round(sched.serving_seconds(), 3),
                "rank_pids": sched.ranks.pids,
                "finished_requests": sched.stats.finished_total,
                # the step clock (simulated seconds, exact under machine load)
                # and every generated token, prefill first tokens included
                "step_clock_s": round(sched._vnow, 6),
                "generation_tokens_total": sched.stats.generation_tokens_total,
            }
        )

    gpus = SimGpus(sched, a.tp_size * a.dp_size)

    async def sim_gpus(request: Request) -> Response:
        return JSONResponse(gpus.answer())

    return [route(state, "/sim/stats", sim_stats), route(state, sim_gpus_wire.PATH, sim_gpus)]
