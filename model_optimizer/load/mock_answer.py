"""How the mock server answers one generation request: streamed chunks on the mock's clock,
usage, injected stream faults; and how it counts prompt tokens. Used by ``mock_server``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web

from model_optimizer.load.mock_prefix import prompt_words


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """The mock's prompt length: token ids counted, else whitespace-separated words."""
    if "messages" in body:
        return sum(_message_words(message) for message in body.get("messages") or [])
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        if all(isinstance(item, int) for item in prompt):
            return len(prompt)
        return sum(len(str(item).split()) for item in prompt)
    return len(str(prompt).split())


def _message_words(message: dict[str, Any]) -> int:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return len(str(content).split())


def error_body(message: str, status: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "MockError", "param": None, "code": status}}


def _chunk_ranges(output_tokens: int, per_chunk: int) -> list[tuple[int, int]]:
    """``(first, end)`` token index ranges of each chunk."""
    return [(first, min(first + per_chunk, output_tokens))
            for first in range(0, output_tokens, per_chunk)]


def _token_text(first: int, end: int) -> str:
    return "".join(f" t{index}" for index in range(first, end))


def scripted_text(answers: dict[str, str], body: dict, chat: bool) -> str | None:
    """The scripted answer to a prompt (a chat's last message), when ``answers`` has one."""
    if not answers:
        return None
    if chat:
        messages = body.get("messages") or [{}]
        key = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    else:
        key = body.get("prompt")
    return answers.get(key) if isinstance(key, str) else None


class Job:
    """One generation request being answered."""

    def __init__(self, app: Any, request: web.Request, body: dict, chat: bool,
                 number: int, arrived: float) -> None:
        self.app, self.config, self.request, self.body = app, app.config, request, body
        self.chat, self.number, self.arrived = chat, number, arrived
        self.output_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens")
                                 or self.config.default_max_tokens)
        bos = 1 if self.config.bos_token and not chat else 0  # as its /tokenize counts
        self.prompt_tokens = count_prompt_tokens(body) + bos
        self.cached_tokens = app.prefix_cache.lookup(prompt_words(body))
        self.request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:16]}"
        self.response: web.StreamResponse | None = None
        self.created = int(time.time())

    def _envelope(self, choices: list, **extra: Any) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.request_id, "object": kind, "created": self.created,
                "model": self.config.model, "choices": choices, **extra}

    def _choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        if self.chat:
            return {"index": 0, "delta": {"content": text}, "logprobs": None,
                    "finish_reason": finish_reason}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                "stop_reason": None}

    def _usage(self) -> dict[str, Any]:
        completion = str(self.output_tokens) if self.config.string_usage else self.output_tokens
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                 "total_tokens": self.prompt_tokens + self.output_tokens}
        if self.config.prompt_tokens_details:  # vLLM: --enable-prompt-tokens-details
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return usage

    def _ready_at(self, token_index: int) -> float:
        return self.arrived + self.config.ttft_s + token_index * self.config.itl_s

    def _count_success(self) -> None:
        counters = self.app.counters
        counters.succeeded += 1
        counters.prompt_tokens += self.prompt_tokens
        counters.generation_tokens += self.output_tokens

    async def whole(self) -> web.Response:
        """A non-streamed answer after the full generation time."""
        await _sleep_until(self._ready_at(self.output_tokens - 1))
        text = scripted_text(self.config.answers, self.body, self.chat)
        if text is None:
            text = _token_text(0, self.output_tokens)
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length"}
        self._count_success()
        body = self._envelope([choice], usage=self._usage())
        body["object"] = "chat.completion" if self.chat else "text_completion"
        return web.json_response(body)

    async def stream(self) -> web.StreamResponse:
        """A streamed answer, with the injected faults of this request number."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        self.response = response
        await response.prepare(self.request)
        if self.chat:
            role = {"index": 0, "delta": {"role": "assistant", "content": ""},
                    "logprobs": None, "finish_reason": None}
            await _send_event(response, self._envelope([role]))
        config = self.config
        drop = bool(config.drop_every_n) and self.number % config.drop_every_n == 0
        stream_error = (bool(config.stream_error_every_n)
                        and self.number % config.stream_error_every_n == 0)
        ranges = _chunk_ranges(self.output_tokens, max(1, config.tokens_per_chunk))
        if config.no_newlines:
            return await self._endless_line(response)
        malformed = (bool(config.malformed_choices_every_n)
                     and self.number % config.malformed_choices_every_n == 0)
        if malformed:
            await _send_event(response, self._envelope({"0": {"text": "x"}}))  # type: ignore[arg-type]
        for chunk_index, (first, end) in enumerate(ranges):
            if drop and chunk_index >= config.drop_after_chunks:
                self.request.transport.abort()  # the client sees a truncated stream
                return response
            if stream_error and chunk_index == 1:
                await _send_event(response, error_body("injected stream error", 500))
                break
            await _sleep_until(self._ready_at(end - 1))
            finish_reason = "length" if end == self.output_tokens else None
            await _send_event(response, self._envelope([self._choice(
                _token_text(first, end), finish_reason)]))
        else:
            self._count_success()
            options = self.body.get("stream_options") or {}
            if options.get("include_usage"):
                await _send_event(response, self._envelope([], usage=self._usage()))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


    async def _endless_line(self, response: web.StreamResponse) -> web.StreamResponse:
        """``data: xxxx...`` without a newline until the client gives up (bounded here too)."""
        for _ in range(64):  # 64 x 64 KiB = 4 MiB, past the client's 1 MiB line limit
            await response.write(b"data: " + b"x" * 65536)
        await response.write_eof()
        return response


async def _send_event(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(event).encode() + b"\n\n")


async def _sleep_until(loop_target: float) -> None:
    """Sleep until the event loop's clock reads ``loop_target`` (a fast-forwarded loop in
    tests makes the injected delays exact)."""
    delay = loop_target - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)
