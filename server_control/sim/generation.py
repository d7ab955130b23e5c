"""Generation endpoints: /generate (native), /v1/completions, /v1/chat/completions.

Tokens come from the scheduler at the simulated rate; each is a word of a small
vocabulary. Streaming answers are Server-Sent Events, one event per decode step.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

if TYPE_CHECKING:
    from server_control.sim.app_view import AppView
    from server_control.sim.requests import Request as SimRequest


WORDS = (
    "the",
    "model",
    "drafts",
    "tokens",
    "and",
    "the",
    "target",
    "verifies",
    "them",
    "in",
    "one",
    "pass",
    "so",
    "that",
    "each",
    "step",
    "yields",
    "more",
    "text",
    "when",
    "batches",
    "are",
    "small",
    "but",
    "large",
    "batches",
    "prefer",
    "plain",
    "decode",
)


class BadRequest(ValueError):
    pass


def error_response(status: int, message: str, kind: str = "BadRequestError") -> JSONResponse:
    return JSONResponse({"object": "error", "message": message, "type": kind, "param": None, "code": status}, status_code=status)


def token_text(rid: str, start: int, end: int) -> str:
    seed = int(rid, 16)
    return "".join(" " + WORDS[(seed + i * 7) % len(WORDS)] for i in range(start, end))


def count_prompt_tokens(value: object) -> int:
    if isinstance(value, str):
        return max(1, len(value) // 4)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return max(1, len(value))
    raise BadRequest("prompt must be a string or a list of token ids")


def positive_int(body: dict[str, Any], *names: str, default: int) -> int:
    for name in names:
        if body.get(name) is not None:
            value = body[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadRequest(f"{name} must be a positive integer, got {value!r}")
            return value
    return default


async def read_json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


class Generator:
    """Runs requests through the scheduler for the HTTP layer."""

    def __init__(self, state: AppView) -> None:
        self.state = state
        self.sched = state.scheduler

    def start(self, *reqs: SimRequest) -> None:
        """Hand requests to the scheduler as one unit (a batched /generate is admitted in
        one prefill step); each gets the event its token stream waits on."""
        for req in reqs:
            req.waiter = asyncio.Event()
        self.sched.submit(*reqs)

    async def tokens(self, req: SimRequest) -> AsyncIterator[tuple[int, int]]:
        """Yields (old_count, new_count) after each step that produced tokens. Starts
        ``req`` unless ``start`` already did."""
        if req.waiter is None:
            self.start(req)
        event = req.waiter
        if event is None:  # start() gave it one
            return
        sent = 0
        try:
            while True:
                await event.wait()
                event.clear()
                # finished is set after the last tokens are counted: read it first
                done = req.finished
                n = req.generated
                if n > sent:  # its latencies are counted by the scheduler (sim/step_output.py)
                    yield sent, n
                    sent = n
                if done:
                    return
        finally:
            if not req.finished:
                self.sched.cancel(req)

    def _check_context(self, prompt_tokens: int) -> None:
        limit = self.state.args.context_length
        if prompt_tokens >= limit:
            raise BadRequest(f"The input ({prompt_tokens} tokens) is longer than the model's context length ({limit} tokens).")

    def meta_info(self, req: SimRequest, started: float) -> dict[str, Any]:
        return {
            "id": req.rid,
            "finish_reason": {"type": "length", "length": req.generated},
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.generated,
            "cached_tokens": 0,
            "spec_verify_ct": req.spec_steps,
            "spec_accept_length": round(req.spec_accept_length, 4),
            "e2e_latency": round(time.monotonic() - started, 4),
        }

    # ---- native /generate --------------------------------------------------------
    async def generate(self, body: dict[str, Any]) -> Response:
        text = body.get("text", body.get("input_ids"))
        if text is None:
            raise BadRequest("either text or input_ids must be given")
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        max_new = positive_int(params, "max_new_tokens", default=128)
        batch = isinstance(text, list) and text and not isinstance(text[0], int)
        prompts = text if batch else [text]
        reqs = []
        for p in prompts:
            n = count_prompt_tokens(p)
            self._check_context(n)
            reqs.append(self.sched.new_request(n, max_new))
        started = time.monotonic()
        if body.get("stream"):
            if batch:
                raise BadRequest("streaming a batch of prompts is not supported")
            return StreamingResponse(self._stream_native(reqs[0], started), media_type="text/event-stream")
        self.start(*reqs)
        try:
            await asyncio.gather(*(self._drain(r) for r in reqs))
        finally:  # the client left: none of its sequences keeps decoding
            for r in reqs:
                if not r.finished:
                    self.sched.cancel(r)
        out = [{"text": token_text(r.rid, 0, r.generated), "meta_info": self.meta_info(r, started)} for r in reqs]
        return JSONResponse(out if batch else out[0])

    async def _drain(self, req: SimRequest) -> None:
        async for _ in self.tokens(req):
            pass

    async def _stream_native(self, req: SimRequest, started: float) -> AsyncIterator[str]:
        async for _old, new in self.tokens(req):
            chunk = {"text": token_text(req.rid, 0, new), "meta_info": self.meta_info(req, started)}
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"

    # ---- OpenAI-compatible -------------------------------------------------------
    async def openai(self, body: dict[str, Any], chat: bool) -> Response:
        model = body.get("model") or self.state.model_name
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("messages must be a non-empty list")
            prompt = "".join(str(m.get("content", "")) if isinstance(m, dict) else "" for m in messages)
            n_prompt = count_prompt_tokens(prompt or " ")
            max_new = positive_int(body, "max_completion_tokens", "max_tokens", default=128)
        else:
            if "prompt" not in body:
                raise BadRequest("prompt is required")
            n_prompt = count_prompt_tokens(body["prompt"])
            max_new = positive_int(body, "max_tokens", default=16)
        self._check_context(n_prompt)
        req = self.sched.new_request(n_prompt, max_new)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
            continuous = usage and bool(opts.get("continuous_usage_stats"))
            gen = self._stream_openai(req, rid, created, model, chat, usage, continuous)
            return StreamingResponse(gen, media_type="text/event-stream")
        await self._drain(req)
        text = token_text(req.rid, 0, req.generated)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length", "matched_stop": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None}
        else:
            choice["text"] = text
        return JSONResponse(
            {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": self._usage(req),
            }
        )

    @staticmethod
    def _usage(req: SimRequest, generated: int | None = None) -> dict[str, Any]:
        n = req.generated if generated is None else generated
        return {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": n,
            "total_tokens": req.prompt_tokens + n,
            "prompt_tokens_details": None,
        }

    async def _stream_openai(
        self, req: SimRequest, rid: str, created: int, model: str, chat: bool, usage: bool, continuous: bool = False
    ) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if chat else "text_completion"

        def event(choice: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
            chunk = {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
            if extra:
                chunk.update(extra)
            return f"data: {json.dumps(chunk)}\n\n"

        if chat:
            yield event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
        async for old, new in self.tokens(req):
            text = token_text(req.rid, old, new)
            done = new >= req.max_new_tokens
            reason = "length" if done else None
            extra = {"usage": self._usage(req, new)} if continuous else None
            if chat:
                yield event({"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": reason}, extra)
            else:
                yield event({"index": 0, "text": text, "logprobs": None, "finish_reason": reason}, extra)
        if usage:
            chunk = {"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": self._usage(req)}
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"
