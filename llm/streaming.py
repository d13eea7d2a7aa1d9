"""Streamed chat completions, one chunk per network read instead of one per token.

A model that streams fast (a local model, a cached answer, a busy process reading late)
puts dozens of SSE events into one network read. Each event costs the same all the way
up: a langchain `AIMessageChunk`, a callback, a LangGraph stream part, a run event. This
stream merges the consecutive deltas that arrived together into one, so the cost of an
answer follows the reads the process made, not its tokens: under load, reads are further
apart and carry more, and the work per answer falls.

Nothing is held back: a reader task parses events as they arrive, and whenever the
consumer asks for the next chunk it gets everything that arrived since it last asked,
merged; the first token is as early as before. Merged are only deltas that concatenate:
answer text with answer text, reasoning with reasoning, and the argument fragments of the
tool call being streamed.
A delta that starts a new tool call, carries a refusal, logprobs or usage, or follows a
finished choice stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import orjson
from openai import APIError, AsyncStream

_T = TypeVar("_T")

# Delta fields that are text and concatenate (reasoning: DeepSeek, Qwen, vLLM ...).
_ANSWER = "content"
_REASONING = ("reasoning_content", "reasoning")


class CoalescingStream(AsyncStream[_T]):
    """`openai.AsyncStream` for Chat Completions, yielding chunks as dicts, merged per read."""

    async def __stream__(self) -> AsyncIterator[_T]:  # type: ignore[override]
        if not hasattr(self._decoder, "decode"):  # a client with a decoder of its own
            async for item in super().__stream__():
                yield item
            return
        # A reader task parses events as they arrive; each turn of the consumer takes all that
        # came meanwhile. The busier the consumer, the more each turn takes.
        arrived: list[Any] = []
        more = asyncio.Event()
        ended: list[BaseException | None] = []

        async def read() -> None:
            try:
                async for batch in self._reads():
                    arrived.extend(batch)
                    more.set()
            except Exception as exc:
                ended.append(exc)
            else:
                ended.append(None)
            finally:
                more.set()

        reader = asyncio.create_task(read(), name="model-stream-reader")
        try:
            while True:
                if not arrived and not ended:
                    more.clear()
                    await more.wait()
                if arrived:
                    batch = arrived[:]
                    arrived.clear()
                    for chunk in merge_chunks(batch):
                        yield chunk
                    continue
                if ended and ended[0] is not None:
                    raise ended[0]
                return
        finally:
            if not reader.done():
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            await self.response.aclose()

    async def _reads(self) -> AsyncIterator[list[Any]]:
        """The chunks of each read from the response, parsed (the stream ends at `[DONE]`)."""
        from openai._exceptions import APIConnectionError, APITimeoutError
        from openai._httpx2 import request_exceptions, timeout_exceptions

        decoder = self._decoder
        lines = _Lines()
        try:
            async for data in self.response.aiter_bytes():
                batch: list[Any] = []
                for line in lines.feed(data):
                    sse = decoder.decode(line.decode("utf-8"))  # type: ignore[union-attr]
                    if sse is None:
                        continue
                    if sse.data.startswith("[DONE]"):
                        if batch:
                            yield batch
                        await self._drain()
                        return
                    batch.append(self._parsed(sse.data))
                if batch:
                    yield batch
        except timeout_exceptions() as err:
            raise APITimeoutError(request=self.response.request) from err
        except request_exceptions() as err:
            raise APIConnectionError(request=self.response.request) from err

    def _parsed(self, data: str) -> Any:
        parsed = orjson.loads(data)
        if isinstance(parsed, dict) and parsed.get("error"):
            error = parsed["error"]
            message = error.get("message") if isinstance(error, dict) else None
            if not message or not isinstance(message, str):
                message = "An error occurred during streaming"
            raise APIError(message=message, request=self.response.request, body=error)
        return parsed

    async def _drain(self) -> None:
        """HTTP/1.1 needs the rest of the body read before the connection is used again."""
        if self.response.http_version != "HTTP/1.1":
            return
        from openai._streaming_cleanup import drain_response_async

        await drain_response_async(self.response)


class _Lines:
    """SSE lines (CR, LF or CRLF ends) from reads that may cut a line, or a CRLF, in two."""

    def __init__(self) -> None:
        self._rest = b""
        self._after_cr = False

    def feed(self, data: bytes) -> list[bytes]:
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]  # the LF of a CRLF whose CR ended the last read
        data = self._rest + data
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:
            self._rest = data
            return []
        self._rest = data[end + 1 :]
        self._after_cr = data[end] == 13 and not self._rest
        return data[: end + 1].splitlines()


def merge_chunks(chunks: list[Any]) -> Iterator[Any]:
    """The chunks in order, each run of mergeable neighbours as one."""
    held: Any = None
    for chunk in chunks:
        if held is None:
            held = chunk
            continue
        merged = _merged(held, chunk)
        if merged is None:
            yield held
            held = chunk
        else:
            held = merged
    if held is not None:
        yield held


def _only_choice(chunk: Any) -> dict[str, Any] | None:
    if not isinstance(chunk, dict) or chunk.get("usage"):
        return None
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    if choice.get("logprobs") or not isinstance(choice.get("delta"), dict):
        return None
    return choice


def _kind(delta: dict[str, Any]) -> str | None:
    """What a delta adds: "" (nothing), "answer", "reasoning", "tool:<index>", None (unmergeable)."""
    kind = ""
    for key, value in delta.items():
        if value is None or key == "role" or (value == "" and key in (_ANSWER, *_REASONING)):
            continue
        if key == _ANSWER and isinstance(value, str):
            this = "answer"
        elif key in _REASONING and isinstance(value, str):
            this = "reasoning:" + key
        elif key == "tool_calls" and isinstance(value, list) and len(value) == 1:
            call = value[0]
            if not isinstance(call, dict) or not isinstance(call.get("index"), int):
                return None
            function = call.get("function") or {}
            if not isinstance(function, dict) or not isinstance(function.get("arguments", ""), str):
                return None
            if set(function) - {"name", "arguments"} or set(call) - {"index", "id", "type", "function"}:
                return None
            this = f"tool:{call['index']}"
        else:
            return None
        if kind and kind != this:
            return None
        kind = this
    return kind


def _merged(first: Any, second: Any) -> Any:
    """`first` and `second` as one chunk, or None when they must stay apart."""
    a, b = _only_choice(first), _only_choice(second)
    if a is None or b is None or a.get("finish_reason") or a.get("index") != b.get("index"):
        return None
    da, db = a["delta"], b["delta"]
    if db.get("role") and db.get("role") != da.get("role"):
        return None
    kind_a, kind_b = _kind(da), _kind(db)
    if kind_a is None or kind_b is None or (kind_a and kind_b and kind_a != kind_b):
        return None
    delta = dict(da)
    if kind_b.startswith("tool:"):
        call_b = db["tool_calls"][0]
        if kind_a and (call_b.get("id") or (call_b.get("function") or {}).get("name")):
            return None  # a new call begins
        if kind_a:
            call_a = dict(da["tool_calls"][0])
            function = dict(call_a.get("function") or {})
            function["arguments"] = (function.get("arguments") or "") + (call_b.get("function") or {}).get(
                "arguments", ""
            )
            call_a["function"] = function
            delta["tool_calls"] = [call_a]
        else:
            delta["tool_calls"] = db["tool_calls"]
    elif kind_b:
        for key in (_ANSWER, *_REASONING):
            if db.get(key):
                delta[key] = (da.get(key) or "") + db[key]
    choice = {**a, "delta": delta, "finish_reason": b.get("finish_reason")}
    return {**first, "choices": [choice]}
