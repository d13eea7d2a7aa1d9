"""A fake LangSmith and Langfuse on loopback, speaking what their SDKs send.

LangSmith's client asks `GET /info`, then sends runs as `POST /runs/multipart` (multipart/form-data,
zstd-compressed when it chooses) or `POST /runs/batch` (JSON). In a multipart batch a run is split
over parts named by operation and run id: `post.<id>` (or `patch.<id>`) holds the run without its
big fields, `post.<id>.inputs`, `.outputs`, `.events`, `.extra` (its metadata), `.error`, `.serialized`
the rest; a run posted at its start is patched at its end. `runs` holds each run, its parts and
patches merged, by run id, as the LangSmith server would store it.

Langfuse's SDK exports OpenTelemetry spans over OTLP/HTTP protobuf to `POST /api/public/otel/v1/traces`;
`spans` holds each span's attributes with its `name`, `trace_id`, `span_id` and `parent_span_id`.
`traces()` groups them as Langfuse shows them: a trace's session and user are those any of its spans
carries (the server lifts `session.id` / `user.id` to the trace).
"""

from __future__ import annotations

import gzip
import json
from email.parser import BytesParser
from typing import Any

from fastapi import FastAPI, Request, Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.fakes._server import LocalServer

_FIELDS = ("inputs", "outputs", "events", "extra", "error", "serialized")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class FakeTracingServices(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self._runs: dict[str, dict[str, Any]] = {}
        self.spans: list[dict[str, Any]] = []
        self.auth: list[str] = []  # the credentials each request carried
        app = FastAPI()

        @app.get("/info")
        async def info() -> dict[str, Any]:
            return {"version": "0.10.0"}

        @app.post("/runs/multipart")
        async def multipart(request: Request) -> Response:
            body = await request.body()
            if request.headers.get("content-encoding") == "zstd":
                import zstandard

                body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
            self._credentials(request)
            head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
            for part in BytesParser().parsebytes(head + body).walk():
                if part.is_multipart():
                    continue
                name = part.get_param("name", header="content-disposition") or ""
                operation, _, rest = str(name).partition(".")
                if operation not in ("post", "patch"):
                    continue  # attachments, feedback
                run_id, _, field = rest.partition(".")
                value = json.loads(part.get_payload(decode=True) or b"null")
                self._merge(run_id, {field: value} if field in _FIELDS else value)
            self.changed()
            return Response(status_code=202)

        @app.post("/runs/batch")
        async def batch(request: Request) -> Response:
            self._credentials(request)
            found = await request.json()
            for run in [*found.get("post", []), *found.get("patch", [])]:
                self._merge(str(run["id"]), run)
            self.changed()
            return Response(status_code=202)

        @app.post("/api/public/otel/v1/traces")
        async def otel(request: Request) -> Response:
            self._credentials(request)
            body = await request.body()
            if request.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            export = ExportTraceServiceRequest()
            if "json" in request.headers.get("content-type", ""):
                json_format.Parse(body, export)
            else:
                export.ParseFromString(body)
            for resource in export.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        self.spans.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex() or None,
                                **attributes,
                            }
                        )
            self.changed()
            return Response(status_code=200)

        self.app = app

    def _credentials(self, request: Request) -> None:
        self.auth.append(request.headers.get("x-api-key") or request.headers.get("authorization") or "")

    def _merge(self, run_id: str, fields: dict[str, Any]) -> None:
        run = self._runs.setdefault(run_id, {"id": run_id})
        for key, value in fields.items():
            if key == "extra" and isinstance(value, dict):  # a patch's extra adds to the post's
                extra = run.setdefault("extra", {})
                extra["metadata"] = {**(extra.get("metadata") or {}), **(value.get("metadata") or {})}
                extra.update({k: v for k, v in value.items() if k != "metadata"})
            elif value is not None:
                run[key] = value

    @property
    def runs(self) -> list[dict[str, Any]]:
        """LangSmith's runs, in the order they were first sent."""
        return list(self._runs.values())

    def children(self, run: dict[str, Any]) -> list[dict[str, Any]]:
        """The runs under `run`, at any depth (by LangSmith's dotted order)."""
        prefix = run["dotted_order"] + "."
        return [r for r in self.runs if str(r.get("dotted_order", "")).startswith(prefix)]

    def traces(self) -> dict[str, dict[str, Any]]:
        """Langfuse's traces by trace id: `spans`, and the `session`, `user` and `name` they carry."""
        found: dict[str, dict[str, Any]] = {}
        for span in self.spans:
            trace = found.setdefault(
                span["trace_id"], {"spans": [], "session": None, "user": None, "name": None}
            )
            trace["spans"].append(span)
            trace["session"] = trace["session"] or span.get("session.id")
            trace["user"] = trace["user"] or span.get("user.id")
            trace["name"] = trace["name"] or span.get("langfuse.trace.name")
        return found

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
