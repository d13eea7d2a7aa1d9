"""A fake LangSmith and Langfuse on loopback, speaking what their SDKs send.

LangSmith's client asks `GET /info`, then sends runs as `POST /runs/multipart` (multipart/form-data,
one part per run or field, zstd-compressed when it chooses) or `POST /runs/batch` (JSON). Langfuse's
SDK exports OpenTelemetry spans over OTLP/HTTP protobuf to `POST /api/public/otel/v1/traces`.
`runs` holds each LangSmith run part that named metadata; `spans` each Langfuse span's attributes.
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


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class FakeTracingServices(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.runs: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []
        self.parts: list = []
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
                self.parts.append((part.get_param("name", header="content-disposition"), part.get_payload(decode=True)[:300]))
                try:
                    self._run(json.loads(part.get_payload(decode=True) or b"null"))
                except ValueError:
                    continue
            self.changed()
            return Response(status_code=202)

        @app.post("/runs/batch")
        async def batch(request: Request) -> Response:
            self._credentials(request)
            found = await request.json()
            for run in [*found.get("post", []), *found.get("patch", [])]:
                self._run(run)
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
                        self.spans.append({"name": span.name, **attributes})
            self.changed()
            return Response(status_code=200)

        self.app = app

    def _credentials(self, request: Request) -> None:
        self.auth.append(request.headers.get("x-api-key") or request.headers.get("authorization") or "")

    def _run(self, run: Any) -> None:
        if isinstance(run, dict) and isinstance((run.get("extra") or {}).get("metadata"), dict):
            self.runs.append(run)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
