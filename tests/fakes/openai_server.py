"""A scripted OpenAI-compatible chat model on 127.0.0.1, spoken to over real HTTP.

`langchain_openai.ChatOpenAI(base_url=fake.base_url)` runs its own code against
it: `/v1/chat/completions`, streaming (SSE deltas, tool-call argument chunks,
usage in the last chunk) and not streaming, OpenAI's error bodies.

Tests script the replies: `fake.script(Reply(text=...), Reply(tool_calls=[...]))`
queues them in order; a reply with `when="..."` is only used for a request whose
last user or tool message contains that text (`echo_and_answer` scripts a bash call and its
answer). Title requests (our title prompt) get an automatic title; anything unscripted gets an
echo of the last user text. With `auto_suggestions` set, follow-up suggestion requests are answered with them
(like titles, outside the script), so a UI that asks after every answer leaves
the script to the agent. With `pace` set (a `Pace`), unscripted agent answers stream as a real
model's do: the first word after `first_token` seconds, then one word every `interval` (titles,
which are not streamed, stay instant).

Providers under load are played too: `refuse(n, retry_after=...)` answers the next n model
requests with 429 (and `Retry-After`); `concurrency_limit` answers 429 to a request arriving
while that many are in flight. `in_flight` / `max_in_flight` count requests being answered
(a streamed one until its last chunk), `refused` the 429s sent for either reason.

Goal mode's evaluator asks for structured output (a JSON schema named
`goal_verdict`): those requests are answered from their own queue, `fake.verdicts(...)` (each a
dict such as `{"verdict": "continue", "next_step": "..."}`; `done` once the queue is empty), and
kept in `verdict_requests`, apart from the agent's.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.fakes._server import LocalServer

TITLE_MARKER = "Write a title for this conversation"
SUGGESTIONS_MARKER = "follow-up questions the user might ask next"
VERDICT_SCHEMA_NAME = "goal_verdict"


@dataclass
class ToolCall:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    when: str | None = None
    delay: float = 0.0  # seconds before answering (slow or hanging models)
    chunk_delay: float = 0.0  # seconds between streamed chunks
    status: int = 200  # non-200: an OpenAI-style error body with `text` as the message
    hold: asyncio.Event | None = None  # the answer waits until the test sets it
    reasoning: str = ""  # a reasoning model's thinking, sent as `reasoning_content` before the text
    stream_error: str | None = None  # streamed: after the text, an OpenAI error event with this message
    finish_reason: str | None = None  # instead of "stop" / "tool_calls" (e.g. "length", "content_filter")
    retry_after: str | None = None  # with a non-200 status: the Retry-After header sent


def echo_and_answer(marker: str, answer: str, when: str | None = None) -> list[Reply]:
    """The model's two turns around one bash call: it runs `echo <marker>` (for a message with
    `when`, if given), then answers `answer` once the call's result shows `marker`."""
    return [
        Reply(tool_calls=[ToolCall("bash", {"command": f"echo {marker}"})], when=when),
        Reply(text=answer, when=marker),
    ]


def two_calls_then_answer(when: str, answer: str, after: str) -> list[Reply]:
    """The model's two turns around two bash calls made side by side (`echo left-call` and `echo
    right-call`, for a message with `when`), then `answer` once a result shows `after`."""
    calls = [ToolCall("bash", {"command": f"echo {side}-call"}) for side in ("left", "right")]
    return [Reply(tool_calls=calls, when=when), Reply(text=answer, when=after)]


@dataclass(frozen=True)
class Pace:
    """How a real model streams: time to the first token, then the time between tokens."""

    first_token: float = 0.3
    interval: float = 0.015

    def seconds(self, tokens: int) -> float:
        """The model's own time for an answer of `tokens` words."""
        return self.first_token + max(0, tokens - 1) * self.interval


# Antler fences untrusted content (agents/graph/middleware/untrusted.py); the echo repeats what is
# inside, as a model reading it would, so a group chat member's "hello" is echoed as "hello".
_FENCE = re.compile(
    r'<untrusted-content id="[0-9a-f]+"[^>]*>\n(.*)\n</untrusted-content id="[0-9a-f]+">', re.S
)


def unfenced(text: str) -> str:
    """`text` with Antler's untrusted-content fences taken off: the words the model reads inside."""
    return _FENCE.sub(lambda m: m.group(1), text)


def _last_text(messages: list[dict[str, Any]], roles: tuple[str, ...] = ("user", "tool")) -> str:
    for message in reversed(messages):
        if message.get("role") in roles:
            content = message.get("content")
            if isinstance(content, list):
                text = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            else:
                text = str(content or "")
            return unfenced(text)
    return ""


class FakeOpenAI(LocalServer):
    """The server and its script. Use `async with FakeOpenAI() as fake:`."""

    def __init__(self, api_key: str | None = None) -> None:
        super().__init__()
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.agent_requests: list[dict[str, Any]] = []  # excluding title requests
        self._script: list[Reply] = []
        self.auto_suggestions: list[str] | None = None
        self.pace: Pace | None = None  # unscripted answers streamed at this pace
        self._verdicts: list[dict[str, Any]] = []
        self.verdict_requests: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.concurrency_limit: int | None = None
        self.refused = 0
        self.holding = 0  # requests waiting on their reply's `hold` now
        self._refusals: list[str | None] = []  # Retry-After of each 429 still to send
        self._changed = asyncio.Event()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._completions)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def refuse(self, count: int, retry_after: str | None = None) -> None:
        """The next `count` requests are refused with 429 (a rate-limit burst), with this Retry-After."""
        self._refusals.extend([retry_after] * count)

    async def wait_until(self, condition: Any, timeout: float = 30.0) -> None:
        """Until `condition()` holds, checked whenever a request starts or ends."""
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def _begin(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self._changed.set()

    def _end(self) -> None:
        self.in_flight -= 1
        self._changed.set()

    def _rate_limited(self, retry_after: str | None, why: str) -> JSONResponse:
        self.refused += 1
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        body = {"error": {"message": why, "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
        return JSONResponse(body, 429, headers=headers)

    def script(self, *replies: Reply) -> None:
        self._script.extend(replies)

    def verdicts(self, *answers: dict[str, Any]) -> None:
        """Queue the goal evaluator's answers, in order."""
        self._verdicts.extend(answers)

    @property
    def pending(self) -> int:
        return len(self._script)

    async def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        """Until `count` agent (non-title) requests have arrived."""
        async with asyncio.timeout(timeout):
            while len(self.agent_requests) < count:
                self._arrived.clear()
                await self._arrived.wait()

    def _choose(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        if any(TITLE_MARKER in str(m.get("content", "")) for m in messages):
            asked = _last_text(messages, ("user",)).split("User:", 1)[-1].split("Assistant:", 1)[0]
            words = asked.split()
            return Reply(text="Chat about " + " ".join(words[:3]))
        if self.auto_suggestions is not None and any(
            SUGGESTIONS_MARKER in str(m.get("content", "")) for m in messages
        ):
            return Reply(text=json.dumps(self.auto_suggestions))
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == VERDICT_SCHEMA_NAME:
            self.verdict_requests.append(body)
            answer = self._verdicts.pop(0) if self._verdicts else {"verdict": "done", "reason": "unscripted"}
            return Reply(text=json.dumps(answer))
        self.agent_requests.append(body)
        self._arrived.set()
        last = _last_text(messages)
        for i, reply in enumerate(self._script):
            if reply.when is None or reply.when in last:
                return self._script.pop(i)
        echo = f"You said: {_last_text(messages, ('user',))}"
        if self.pace is not None and body.get("stream"):
            # The first word goes `chunk_delay` after `delay`: together, `first_token`.
            first = max(0.0, self.pace.first_token - self.pace.interval)
            return Reply(text=echo, delay=first, chunk_delay=self.pace.interval)
        if self.pace is not None:  # not streamed: the whole answer when a streamed one would end
            return Reply(text=echo, delay=self.pace.seconds(len(echo.split())))
        return Reply(text=echo)

    async def _completions(self, request: Request) -> Any:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            # As OpenAI's API does: a body it is not told is JSON is not read as JSON.
            refusal = {"message": "Content-Type must be application/json", "type": "invalid_request_error"}
            return JSONResponse({"error": refusal}, 415)
        body = await request.json()
        self.requests.append(body)
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse(
                {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, 401
            )
        if self._refusals:
            return self._rate_limited(self._refusals.pop(0), "Rate limit reached; please retry later")
        if self.concurrency_limit is not None and self.in_flight >= self.concurrency_limit:
            return self._rate_limited("1", f"Too many concurrent requests (limit {self.concurrency_limit})")
        self._begin()
        streaming = False
        try:
            response = await self._answer(body)
            streaming = isinstance(response, StreamingResponse)
            return response
        finally:
            if not streaming:
                self._end()

    async def _answer(self, body: dict[str, Any]) -> Any:
        reply = self._choose(body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hold is not None:
            self.holding += 1
            self._changed.set()
            try:
                await reply.hold.wait()
            finally:
                self.holding -= 1
                self._changed.set()
        if reply.status != 200:
            headers = {"retry-after": reply.retry_after} if reply.retry_after is not None else {}
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            return JSONResponse(
                {"error": {"message": reply.text, "type": kind}}, reply.status, headers=headers
            )
        model = body.get("model", "fake")
        usage = {
            "prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in body.get("messages", [])),
            "completion_tokens": max(len(reply.text.split()), 1),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if body.get("stream"):
            return StreamingResponse(
                self._counted(self._stream(reply, model, usage)), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.args)},
                }
                for c in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
                }
            ],
            "usage": usage,
        }

    async def _counted(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """A streamed answer, in flight until its last chunk is sent (or the client goes away)."""
        try:
            async for piece in chunks:
                yield piece
        finally:
            self._end()

    async def _stream(self, reply: Reply, model: str, usage: dict[str, int]) -> AsyncIterator[bytes]:
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                if delta is not None
                else [],
                **extra,
            }
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        thoughts = reply.reasoning.split(" ") if reply.reasoning else []
        for i, thought in enumerate(thoughts):
            yield chunk({"reasoning_content": thought if i == 0 else " " + thought, "content": None})
        words = reply.text.split(" ") if reply.text else []
        for i, word in enumerate(words):
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)
            yield chunk({"content": word if i == 0 else " " + word})
        if reply.stream_error is not None:
            error = {"error": {"message": reply.stream_error, "type": "server_error"}}
            yield f"data: {json.dumps(error)}\n\n".encode()
            return
        for index, call in enumerate(reply.tool_calls):
            args = json.dumps(call.args)
            half = len(args) // 2
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": args[:half]},
                        }
                    ]
                }
            )
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]})
        yield chunk({}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"))
        yield chunk(None, usage=usage)  # type: ignore[arg-type]
        yield b"data: [DONE]\n\n"
