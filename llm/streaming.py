"""Streamed chat completions, one chunk per network read instead of one per token.

A model that streams fast (a local model, a cached answer, a busy process reading late)
puts dozens of SSE events into one network read. Each event costs the same all the way
up: a langchain `AIMessageChunk`, a callback, a LangGraph stream part, a run event. This
stream merges the consecutive deltas that arrived together into one, so the cost of an
answer follows the reads the process made, not its tokens: under load, reads are further
apart and carry more, and the work per answer falls.

A reader task parses events as they arrive, and whenever the consumer asks for the next
chunk it gets everything that arrived since it last asked, merged. A real model sends a
token every 10-30 ms for seconds, and a consumer that keeps up would take each token
alone: after a chunk, the next waits until `STREAM_WINDOW` has passed (or the answer has
ended), so a paced answer costs a chunk per window, not one per token, and a read of the
connection per window too: the response body holds its next read until the window ends or the
body does (`llm.http`). The first token after a quiet spell goes at once, and no text waits
longer than the window (live readers see new text at that cadence). Merged are only deltas that concatenate:
answer text with answer text, reasoning with reasoning, and the argument fragments of the
tool call being streamed.
A delta that starts a new tool call, carries a refusal, logprobs or usage, or follows a
finished choice stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import orjson
from openai import APIError, AsyncStream

from bus.ticks import window_end
from llm.pace import STREAM_WINDOW, pace_now
from llm.telemetry import first_chunk

_T = TypeVar("_T")
DRAIN_SECONDS = 0.1  # what the rest of a finished body may take to arrive (as the SDK allows)
# Delta fields that are text and concatenate (reasoning: DeepSeek, Qwen, vLLM ...).
_ANSWER = "content"
_REASONING = ("reasoning_content", "reasoning")


class CoalescingStream(AsyncStream[_T]):
    """`openai.AsyncStream` for Chat Completions, yielding chunks as dicts, merged per read."""

    window = STREAM_WINDOW  # seconds; 0 passes each read on as the consumer asks

    def _window(self) -> float:
        """The window now: the run's pace (`pace_streams`) if it has one, else the stream's own."""
        pace = pace_now()
        return self.window if pace is None else pace.window

    async def __stream__(self) -> AsyncIterator[_T]:
        if not hasattr(self._decoder, "decode"):  # a client with a decoder of its own
            async for item in super().__stream__():
                yield item
            return
        # A reader task parses events as they arrive; each turn of the consumer takes all that
        # came meanwhile. The busier the consumer, the more each turn takes.
        arrived: list[Any] = []
        more = asyncio.Event()
        finished = asyncio.Event()  # the reader is done: what arrived goes without waiting
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
                if not ended:  # stopped from outside (not by the consumer): the stream cannot go on
                    ended.append(RuntimeError("the model stream's reader was stopped"))
                finished.set()
                more.set()

        reader = asyncio.create_task(read(), name="model-stream-reader")
        first = True
        loop = asyncio.get_running_loop()
        closes = float("-inf")  # loop time the window opened by the last chunk passed on ends
        try:
            while True:
                if not arrived and not ended:
                    more.clear()
                    await more.wait()
                wait = closes - loop.time()
                if arrived and not ended and wait > 0:
                    # Tokens paced by the model: gather the window's worth (the end cuts it short).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await finished.wait()
                if arrived:
                    if first:
                        first = False
                        first_chunk()
                    batch = arrived[:]
                    arrived.clear()
                    if any(_says_something(chunk) for chunk in batch):
                        # (the opening role-only chunk starts no window: the first token is not held)
                        window = self._window()
                        closes = window_end(loop.time(), window) if window > 0 else closes
                    for chunk in merge_chunks(batch):
                        yield chunk
                    continue
                if ended and ended[0] is not None:
                    raise ended[0]
                return
        finally:
            try:
                if not reader.done():
                    reader.cancel()
                    await asyncio.wait([reader])  # (a cancellation of this task still propagates)
            finally:
                await self.response.aclose()

    async def _reads(self) -> AsyncIterator[list[Any]]:
        """The chunks of each read from the response, parsed (the stream ends at `[DONE]`)."""
        from openai._exceptions import APIConnectionError, APITimeoutError
        from openai._httpx2 import request_exceptions, timeout_exceptions

        lines = _Lines()
        events = _Events(self._decoder)
        hold = _hold_of(self.response.stream)
        try:
            async for data in self.response.aiter_bytes():
                batch: list[Any] = []
                for event in events.feed(lines.feed(data)):
                    if event.startswith("[DONE]"):
                        if batch:
                            yield batch
                        await self._drain()
                        return
                    try:
                        batch.append(self._parsed(event))
                    except Exception:
                        if batch:  # what came before the error is passed on first
                            yield batch
                        raise
                if batch:
                    window = self._window()
                    if hold is not None and window > 0 and _goes_on(batch):
                        # the window's next tokens in one read (`llm.http`)
                        hold(window_end(asyncio.get_running_loop().time(), window))
                    yield batch
        except timeout_exceptions() as err:
            raise APITimeoutError(request=self.response.request) from err
        except request_exceptions() as err:
            raise APIConnectionError(request=self.response.request) from err

    def _parsed(self, data: str) -> Any:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:  # what orjson refuses and json takes (NaN, a lone surrogate)
            parsed = json.loads(data)
        if isinstance(parsed, dict) and parsed.get("error"):
            error = parsed["error"]
            message = error.get("message") if isinstance(error, dict) else None
            if not message or not isinstance(message, str):
                message = "An error occurred during streaming"
            raise APIError(message=message, request=self.response.request, body=error)
        return parsed

    async def _drain(self) -> None:
        """HTTP/1.1 needs the rest of the body (after `[DONE]`: the end of the chunked encoding)
        read before the connection is used again; a body that does not end soon is left to close."""
        if self.response.http_version != "HTTP/1.1" or self.response.is_closed:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(DRAIN_SECONDS):
                async for _ in self.response.stream:  # type: ignore[union-attr]  # an async client's: an AsyncByteStream
                    pass


class _Lines:
    """SSE lines (CR, LF or CRLF ends) from reads that may cut a line, or a CRLF, in two."""

    def __init__(self) -> None:
        self._rest = b""
        self._after_cr = False

    def feed(self, data: bytes) -> list[bytes]:
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]  # the LF of a CRLF whose CR ended the last read
        self._after_cr = False
        data = self._rest + data
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:
            self._rest = data
            return []
        self._rest = data[end + 1 :]
        self._after_cr = data[end] == 13 and not self._rest
        return data[: end + 1].splitlines()


class _Events:
    """The data of each server-sent event in the lines given, as the SDK's decoder would give it.

    An OpenAI-compatible stream is `data: <json>` lines, each event ended by a blank line: those are
    read here, a line costing a prefix check (the decoder parsed each line as a field, and made an
    event object of each). Any other line (an `event:` or `retry:` field, a comment, `data:` with no
    space, a blank line with no data before it) goes to the decoder itself, with the data lines of
    the event it belongs to, until that event ends.
    """

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder
        self._data: list[bytes] = []  # data lines of the event being read here
        self._decoder_busy = False  # the decoder holds part of the event being read

    def feed(self, lines: list[bytes]) -> list[str]:
        events: list[str] = []
        for line in lines:
            if not self._decoder_busy:
                if line.startswith(b"data: "):
                    self._data.append(line[6:])
                    continue
                if not line and self._data:
                    events.append(b"\n".join(self._data).decode("utf-8"))
                    self._data.clear()
                    continue
            if self._data:  # the event's data so far, then this line: the decoder's now
                for value in self._data:
                    self._decoder.decode("data: " + value.decode("utf-8"))
                self._data.clear()
                self._decoder_busy = True
            sse = self._decoder.decode(line.decode("utf-8"))
            if sse is not None:
                self._decoder_busy = False
                events.append(sse.data)
            elif line.split(b":", 1)[0] in (b"data", b"event", b"retry"):
                self._decoder_busy = True
        return events


def _goes_on(batch: list[Any]) -> bool:
    """Whether more of the answer is to come after `batch`, which says something: no choice in it
    has finished, and no usage (sent after the last choice) has come."""
    said = False
    for chunk in batch:
        if not isinstance(chunk, dict) or chunk.get("usage"):
            return False
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("finish_reason"):
                return False
        said = said or _says_something(chunk)
    return said


def _hold_of(stream: Any) -> Any:
    """The `hold` of the response body under httpx's wrappers (`llm.http`), if it has one."""
    for _ in range(4):
        hold = getattr(stream, "hold", None)
        if hold is not None:
            return hold
        stream = getattr(stream, "_stream", None)
    return None


def merge_chunks(chunks: list[Any]) -> Iterator[Any]:
    """The chunks in order, each run of mergeable neighbours as one."""
    group: _Group | None = None
    for chunk in chunks:
        choice = _only_choice(chunk)
        kind = _kind(choice["delta"]) if choice is not None else None
        if group is not None and group.take(choice, kind):
            continue
        if group is not None:
            yield group.chunk()
        if choice is None or kind is None:
            group = None
            yield chunk
        else:
            group = _Group(chunk, choice, kind)
    if group is not None:
        yield group.chunk()


class _Group:
    """Neighbouring chunks becoming one: the first, and what the others add to its delta."""

    __slots__ = ("args", "choice", "finish", "first", "kind", "replaced", "size", "texts")

    def __init__(self, first: dict[str, Any], choice: dict[str, Any], kind: str) -> None:
        self.first = first
        self.choice = choice
        self.kind = kind
        self.finish = choice.get("finish_reason")
        self.size = 1
        self.texts: dict[str, list[str]] = {}
        self.args: list[str] = []  # argument fragments of the tool call being streamed
        self.replaced: dict[str, Any] = {}

    def take(self, choice: dict[str, Any] | None, kind: str | None) -> bool:
        if choice is None or kind is None or self.finish or choice.get("index") != self.choice.get("index"):
            return False
        delta = choice["delta"]
        role = delta.get("role")
        if role and role != self.choice["delta"].get("role"):
            return False
        if self.kind and kind and self.kind != kind:
            return False
        if kind.startswith("tool:"):
            call = delta["tool_calls"][0]
            function = call.get("function") or {}
            if self.kind:
                if call.get("id") or function.get("name"):
                    return False  # a new call begins
                self.args.append(function.get("arguments", ""))
            else:
                self.replaced["tool_calls"] = delta["tool_calls"]
        elif kind:
            for key in (_ANSWER, *_REASONING):
                text = delta.get(key)
                if text:
                    self.texts.setdefault(key, []).append(text)
        if kind:
            self.kind = kind
        self.finish = choice.get("finish_reason")
        self.size += 1
        return True

    def chunk(self) -> dict[str, Any]:
        if self.size == 1:
            return self.first
        delta = {**self.choice["delta"], **self.replaced}
        for key, parts in self.texts.items():
            delta[key] = (delta.get(key) or "") + "".join(parts)
        if self.args:
            call = dict(delta["tool_calls"][0])
            function = dict(call.get("function") or {})
            function["arguments"] = (function.get("arguments") or "") + "".join(self.args)
            call["function"] = function
            delta["tool_calls"] = [call]
        choice = {**self.choice, "delta": delta, "finish_reason": self.finish}
        return {**self.first, "choices": [choice]}


def _says_something(chunk: Any) -> bool:
    """Whether a chunk carries anything a reader sees (text, reasoning, a tool call, usage ...)."""
    choice = _only_choice(chunk)
    return choice is None or _kind(choice["delta"]) != ""


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
