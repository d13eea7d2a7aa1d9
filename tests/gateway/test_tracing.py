"""HTTP in traces: a caller's `traceparent` is continued through the run, `X-Trace-Id` answers."""

from __future__ import annotations

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.tracing import parent_of, spans  # noqa: F401  (the fixture)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


async def test_a_run_sent_with_a_traceparent_continues_the_callers_trace(
    spans: InMemorySpanExporter,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    thread = (await http.post("/threads", json={})).json()["thread_id"]
    body = {"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    answer = await http.post(
        f"/threads/{thread}/runs/wait", json=body, headers={"traceparent": f"00-{TRACE}-{CALLER_SPAN}-01"}
    )
    assert answer.status_code == 200
    assert answer.headers["x-trace-id"] == TRACE

    found = [s for s in spans.get_finished_spans() if format(s.context.trace_id, "032x") == TRACE]
    [request] = [s for s in found if s.name == "POST /threads/{thread_id}/runs/wait"]  # (the route)
    assert request.kind is SpanKind.SERVER
    assert format(request.parent.span_id, "016x") == CALLER_SPAN  # type: ignore[union-attr]
    assert request.attributes["http.response.status_code"] == 200
    [runner] = [s for s in found if s.name == "process runner"]
    assert parent_of(found, runner) is request
    [agent] = [s for s in found if s.name == "invoke_agent lead_agent"]
    assert agent.attributes["gen_ai.conversation.id"] == thread


async def test_without_a_traceparent_each_request_starts_a_trace_of_its_own(
    spans: InMemorySpanExporter,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    first = (await http.get("/models")).headers["x-trace-id"]
    second = (await http.get("/models")).headers["x-trace-id"]
    assert len(first) == 32
    assert first != second
