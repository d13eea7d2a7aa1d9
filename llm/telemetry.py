"""What a model call measures about itself: duration, time to its first chunk, tokens.

`ModelCalls.call` (llm.guard) wraps every model call of a process in `measured(...)`; the
streaming transport (llm.streaming) marks the first chunk it yields with `first_chunk()`. They
meet through a context variable: the stream is read inside the call's task, so no object has to
be threaded through LangChain. Outside a measured call `first_chunk()` does nothing.

The figures go to the GenAI families of `bus.metrics` (and, with tracing on, to the call's
`chat` span: `bus.tracing`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind

from bus import tracing
from bus.metrics import MODEL_DURATION, MODEL_FIRST_CHUNK, MODEL_TOKENS, labelled

OPERATION = "chat"


@dataclass
class CallTiming:
    model: str
    started: float
    first_chunk: float | None = None
    span: Any = None  # the call's `chat` span, when tracing is on


_current: contextvars.ContextVar[CallTiming | None] = contextvars.ContextVar(
    "antler_model_call", default=None
)


def first_chunk() -> None:
    """The model call under way has yielded a chunk (only the first one counts)."""
    timing = _current.get()
    if timing is not None and timing.first_chunk is None:
        timing.first_chunk = time.monotonic()
        waited = timing.first_chunk - timing.started
        labelled(MODEL_FIRST_CHUNK, OPERATION, timing.model).observe(waited)
        if timing.span is not None:
            timing.span.set_attribute("gen_ai.response.time_to_first_chunk", waited)


@contextlib.contextmanager
def measured(model: str) -> Iterator[CallTiming]:
    """Time one model call (its tries included) as `gen_ai_client_operation_duration_seconds`."""
    timing = CallTiming(model, time.monotonic())
    token = _current.set(timing)
    error = ""
    attributes = {"gen_ai.operation.name": OPERATION, "gen_ai.request.model": model}
    try:
        with tracing.span(f"{OPERATION} {model}", attributes, SpanKind.CLIENT) as span:
            timing.span = span
            yield timing
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        _current.reset(token)
        labelled(MODEL_DURATION, OPERATION, model, error).observe(time.monotonic() - timing.started)


def usage_of(result: Any) -> dict[str, int]:
    """`usage_metadata` of a model call's answer: an AIMessage, or a ModelResponse holding one."""
    usage = getattr(result, "usage_metadata", None)
    if usage is None:
        inner = getattr(result, "model_response", result)  # ExtendedModelResponse
        for message in reversed(list(getattr(inner, "result", None) or [])):
            usage = getattr(message, "usage_metadata", None)
            if usage is not None:
                break
    return dict(usage or {})


def count_tokens(timing: CallTiming, result: Any) -> dict[str, int]:
    """Observe the answer's input and output tokens (and put them on the call's span); its usage."""
    usage = usage_of(result)
    for kind, key in (("input", "input_tokens"), ("output", "output_tokens")):
        if usage.get(key):
            labelled(MODEL_TOKENS, OPERATION, timing.model, kind).observe(usage[key])
            if timing.span is not None:
                timing.span.set_attribute(f"gen_ai.usage.{key}", usage[key])
    return usage
