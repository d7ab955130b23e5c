"""What the simulator tells a client about itself, as SGLang 0.5.23 does: the routes SGLang's
gateway (smg) probes when it registers and monitors a worker.

smg 1.13 asks a new worker, in order: ``GET /health``, ``/v1/models``, ``/server_info``,
``/model_info`` (then the deprecated ``/get_model_info`` if that is missing), ``/loads?model=``
(not a route of SGLang 0.5.23: 404 there and here) and ``/v1/loads?include=core,disagg,queues,
memory`` (its load monitor); ``POST /flush_cache`` through the gateway reaches every worker.
The shapes follow sglang/srt/entrypoints/http_server.py and v1_loads.py, and
sglang/srt/managers/load_snapshot.py (``LoadSnapshot.to_dict``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server_control.protocol.sglang_version import SGLANG_VERSION

if TYPE_CHECKING:
    from server_control.sim.app_view import AppView


RouteMaker = Callable[..., Route]

LOAD_SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
GET_MODEL_INFO_DEPRECATED = (
    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead."
)


def model_card(state: AppView, model: str) -> dict[str, Any]:
    return {
        "id": model,
        "object": "model",
        "created": int(state.started),
        "owned_by": "sglang",
        "root": model,
        "parent": None,
        "max_model_len": state.args.context_length,
    }


def model_info(state: AppView) -> dict[str, Any]:
    a = state.args
    return {
        "model_path": a.model_path,
        "served_model_name": state.model_name,
        "tokenizer_path": a.tokenizer_path or a.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
    }


def load_entry(state: AppView, rank: int, include: set[str] | None) -> dict[str, Any]:
    """One DP rank's ``LoadSnapshot.to_dict(include)``: every core key, then the sections asked for."""
    a, s = state.args, state.scheduler.stats
    snap = state.scheduler.snapshot_switch()
    entry = {
        "timestamp": time.time(),
        "dp_rank": rank,
        "num_running_reqs": s.running,
        "num_waiting_reqs": s.waiting,
        "num_waiting_uncached_tokens": 0,
        "num_used_tokens": s.tokens_in_use,
        "num_total_tokens": s.tokens_in_use,
        "num_active_tokens": s.tokens_in_use,
        "num_prealloc_ready_tokens": 0,
        "max_total_num_tokens": a.max_total_tokens,
        "max_running_requests": a.max_running_requests,
        "token_usage": round(s.token_usage, 4),
        "gen_throughput": round(s.gen_throughput, 4),
        "cache_hit_rate": 0.0,
        "utilization": round(s.running / a.max_running_requests, 4),
        "total_prefill_uncached_tokens": s.prompt_tokens_total,
        "total_prefill_busy_us": 0,
        "decode_moments": None,
    }
    if include == {"core"}:
        return entry
    sections = {
        "memory": ("memory", {"weight_gb": 8.19, "kv_cache_gb": 32.0, "graph_gb": 1.02, "token_capacity": a.max_total_tokens}),
        "queues": ("queues", {"waiting": s.waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}),
    }
    if a.speculative_algorithm:  # "mode" is ours (the patch's switch); SGLang has the first two
        sections["spec"] = (
            "speculative",
            {
                "accept_length": round(s.accept_length, 4),
                "accept_rate": round(s.accept_rate, 4),
                "mode": snap["mode"] if snap else None,
            },
        )
    for name, (key, value) in sections.items():
        if include is None or "all" in include or name in include:
            entry[key] = value
    return entry


def parse_include(raw: str | None) -> set[str] | None:
    """``include=core,memory`` -> {"core", "memory"}; ValueError names unknown sections."""
    if not raw:
        return None
    wanted = {p.strip() for p in raw.split(",")}
    if not wanted <= LOAD_SECTIONS:
        raise ValueError(f"Invalid include sections: {wanted - LOAD_SECTIONS}. Valid options: {sorted(LOAD_SECTIONS)}")
    return wanted


def loads_body(state: AppView, include: set[str] | None, dp_rank: int | None) -> dict[str, Any]:
    ranks = range(state.args.dp_size) if dp_rank is None else [dp_rank]
    return {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(),
        "version": SGLANG_VERSION,
        "accelerator": None,
        "num_accelerators": state.args.tp_size,
        "loads": [load_entry(state, r, include) for r in ranks],
    }


def routes(state: AppView, route: RouteMaker) -> list[Route]:
    """The catalog routes, wrapped by the app's ``route`` (auth as SGLang)."""

    async def v1_models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_card(state, state.model_name)]})

    async def v1_model(request: Request) -> Response:
        model = request.path_params["model"]
        if model != state.model_name:
            return JSONResponse(
                {
                    "error": {
                        "message": f"The model '{model}' does not exist",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                status_code=404,
            )
        return JSONResponse(model_card(state, model))

    async def get_model_info(request: Request) -> Response:
        state.log.warning(GET_MODEL_INFO_DEPRECATED)
        return JSONResponse(model_info(state))

    async def info(request: Request) -> Response:
        return JSONResponse(model_info(state))

    async def flush_cache(request: Request) -> Response:
        s = state.scheduler.stats  # SGLang flushes only a fully idle scheduler
        if s.running or s.waiting:
            state.log.warning(
                f"Cache not flushed because there are pending requests. #queue-req: {s.waiting}, #running-req: {s.running}"
            )
            return Response("Flush cache failed.\n", status_code=400)
        state.log.info("Cache flushed successfully!")
        return Response(
            "Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n"
        )

    return [
        route(state, "/v1/models", v1_models),
        route(state, "/v1/models/{model:path}", v1_model),
        route(state, "/model_info", info),
        route(state, "/get_model_info", get_model_info),
        route(state, "/flush_cache", flush_cache, ("GET", "POST"), "admin_optional"),
    ]
