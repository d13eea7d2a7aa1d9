"""Tracing on for one test, into the OpenTelemetry SDK's in-memory exporter (`bus.tracing`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bus import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Request it before the stack's fixtures: what they build (the gateway's middleware) sees it on."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
        provider.shutdown()


def parent_of(found: list[ReadableSpan], span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None, f"{span.name} has no parent"
    [parent] = [s for s in found if s.context.span_id == span.parent.span_id]
    return parent
