"""Traces across the bus: W3C trace context in NATS headers, spans where the work is done.

Off by default. On when config says so (`observability.tracing: true`) or, left unset, when the
standard OpenTelemetry environment asks for an exporter (`OTEL_TRACES_EXPORTER`, or
`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED`.
Each process exports its own spans (OTLP over HTTP by default, `console` for a look; the SDK reads
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and the exporter's settings).

The trace follows the message, not the process: the bus layer carries it, in one place each way.

- `Bus.publish`, `publish_pipelined`, `publish_core` and `request` put the current context into
  the message's headers (`traceparent`, `tracestate`: `inject`). A publish with no trace under way
  (an adapter passing a platform message on) starts one with a `send` span of its own.
- `Consumer` takes it out of each message it handles and runs the handler in a `process` span
  (`consuming`); a consumer of many small messages (a run's events) may keep the context without a
  span of its own. A micro service's endpoint answers in a `server` span (`bus.service`).
- The work itself: the runner's and the subagent executor's `invoke_agent` span around a run,
  `chat` around each model call (llm.telemetry), `execute_tool` around each tool call; the gateway
  continues an HTTP caller's `traceparent` and answers `X-Trace-Id`.

When off, nothing here creates an object: every helper checks one module flag and returns a shared
no-op, so the hot path pays a branch per publish and per message.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Iterator, Mapping
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

T = TypeVar("T")

ON = False  # read by every helper; set once per process by `setup` (tests: `enable`/`disable`)
_tracer: trace.Tracer = trace.NoOpTracer()
_propagator = TraceContextTextMapPropagator()
_NULL = contextlib.nullcontext()
TRACE_HEADERS = ("traceparent", "tracestate")

# Exceptions that settle a message without failing it (`bus.delivery`'s control flow, LangGraph's).
_NOT_FAILURES = frozenset({"Defer", "Abandon", "GraphBubbleUp", "GraphInterrupt", "CancelledError"})


def wanted(setting: bool | None) -> bool:
    """Whether tracing is on: the config's `observability.tracing`, else the OTEL_* environment."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if setting is not None:
        return setting
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup(setting: bool | None, service: str) -> bool:
    """Turn tracing on for this process if `wanted`, exporting as the environment says. Returns
    whether it is on. A missing exporter package is logged and leaves tracing off."""
    if ON or not wanted(setting):
        return ON
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("tracing asked for, but opentelemetry-exporter-otlp-proto-http is not installed")
            return False
        exporter = OTLPSpanExporter()
    # OTEL_SERVICE_NAME, when set, names the service; else the component does.
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": f"antler-{service}"}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    enable(provider)
    log.info("tracing on: spans of %s exported (%s)", service, type(exporter).__name__)
    return True


def enable(provider: Any) -> None:
    """Trace with `provider` (an SDK TracerProvider) from now on."""
    global ON, _tracer
    _tracer = provider.get_tracer("antler")
    ON = True


def disable() -> None:
    global ON, _tracer
    ON = False
    _tracer = trace.NoOpTracer()


# ---------------------------------------------------------------------- context in headers


def inject(headers: dict[str, str] | None, subject: str, client: str = "") -> tuple[dict[str, str], Any]:
    """`headers` with the current trace context added, and a `send` span to end after the publish
    when no trace was under way (else None). Callers check `ON` first."""
    carrier = dict(headers or {})
    started = None
    if not trace.get_current_span().get_span_context().is_valid:
        attributes = {"messaging.system": "nats", "messaging.destination.name": subject}
        attributes["antler.process"] = client
        started = _tracer.start_span(f"send {subject}", kind=SpanKind.PRODUCER, attributes=attributes)
        _propagator.inject(carrier, context=trace.set_span_in_context(started))
    else:
        _propagator.inject(carrier)
    return carrier, started


def extract(headers: Mapping[str, str] | None) -> Any:
    """The trace context a message carries (an empty context when it carries none)."""
    return _propagator.extract(dict(headers or {}))


def consuming(
    headers: Mapping[str, str] | None, subject: str, durable: str, client: str, *, span: bool = True
) -> Any:
    """Handle a message in its trace: a `process` span (kind consumer) under the context it
    carries, or with `span=False` only that context, so what the handler publishes goes on in it."""
    if not ON:
        return _NULL
    return _consuming(headers, subject, durable, client, span)


@contextlib.contextmanager
def _consuming(
    headers: Mapping[str, str] | None, subject: str, durable: str, client: str, span: bool
) -> Iterator[None]:
    parent = extract(headers)
    if not span:
        token = otel_context.attach(parent)
        try:
            yield
        finally:
            otel_context.detach(token)
        return
    attributes = {
        "messaging.system": "nats",
        "messaging.operation.type": "process",
        "messaging.destination.name": subject,
        "messaging.consumer.group.name": durable,
        "antler.process": client,
    }
    with _span(f"process {durable}", SpanKind.CONSUMER, attributes, parent):
        yield


def serving(headers: Mapping[str, str] | None, service: str, endpoint: str, client: str) -> Any:
    """A micro service's answer to one request, in the caller's trace (kind server)."""
    if not ON:
        return _NULL
    attributes = {
        "rpc.system": "nats",
        "rpc.service": service,
        "rpc.method": endpoint,
        "antler.process": client,
    }
    return _span(f"{service} {endpoint}", SpanKind.SERVER, attributes, extract(headers))


def continuing(headers: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any]) -> Any:
    """A server span under the trace context of a request from outside the bus (HTTP's headers)."""
    if not ON:
        return _NULL
    return _span(name, SpanKind.SERVER, attributes, extract(headers))


# ---------------------------------------------------------------------- spans of work


def span(name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL) -> Any:
    """A span of this process's work under the current one (a no-op context when off). The span,
    or None, is what `with ... as s` gives."""
    if not ON:
        return _NULL
    return _span(name, kind, attributes or {}, None)


def in_span(work: Awaitable[T], name: str, attributes: Mapping[str, Any] | None = None) -> Awaitable[T]:
    """`work` run inside a span (off: `work` itself, unwrapped)."""
    if not ON:
        return work

    async def traced() -> T:
        with _span(name, SpanKind.INTERNAL, attributes or {}, None):
            return await work

    return traced()


def annotate(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span (nothing when off or outside a span)."""
    if ON:
        current = trace.get_current_span()
        if current.is_recording():
            current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def current_trace_id() -> str | None:
    """The current trace's id, 32 hex digits (None when off or outside a trace)."""
    if not ON:
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


@contextlib.contextmanager
def _span(name: str, kind: SpanKind, attributes: Mapping[str, Any], parent: Any) -> Iterator[Span]:
    with _tracer.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if type(exc).__name__ not in _NOT_FAILURES and not any(
                cls.__name__ in _NOT_FAILURES for cls in type(exc).__mro__
            ):
                current.record_exception(exc)
                current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
                current.set_attribute("error.type", type(exc).__name__)
            raise
