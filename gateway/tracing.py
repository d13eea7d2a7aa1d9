"""HTTP requests in their traces: a caller's `traceparent` is continued, and `X-Trace-Id` answers.

Installed only when tracing is on (`bus.tracing`): off, a request meets no extra middleware. Each
request is a server span (`POST /api/threads/{id}/runs/stream` as the route's path, its status);
what the handler publishes on the bus (a run request, a service call) carries the trace on, so an
HTTP run is one trace from the gateway through the runner and what the run calls. The response
says the trace's id in `X-Trace-Id` (as DeerFlow's gateway does), for a client's bug report.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bus import tracing

TRACE_ID_HEADER = b"x-trace-id"
_CARRIED = {name.encode() for name in tracing.TRACE_HEADERS}


class TraceRequests:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.ON:
            await self.app(scope, receive, send)
            return
        carried = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k.lower() in _CARRIED}
        method = scope["method"]
        attributes = {"http.request.method": method, "url.path": scope["path"]}
        with tracing.continuing(carried, f"{method} {scope['path']}", attributes) as span:
            trace_id = (tracing.current_trace_id() or "").encode()

            async def answer(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), (TRACE_ID_HEADER, trace_id)]
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await self.app(scope, receive, answer)
            route = getattr(scope.get("route"), "path", None)  # the route's template, once routed
            if route:
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
