"""Request bodies over their limit are refused while they arrive: 413, and the rest is never read.

Over raw sockets: the client sends part of an oversized body and then waits. A
gateway that reads to the end before answering would wait with it, and the
test would time out instead of seeing the 413.
"""

from __future__ import annotations

import asyncio
import json
import re
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI, Request
from starlette.types import Message

from gateway.limits import MB, BodyLimit, BodyLimitMiddleware

LIMIT = 1 * MB  # the test gateway's max_upload_mb
BOUNDARY = "antler-test-boundary"


@pytest_asyncio.fixture
async def thread(api_url: str) -> str:
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}) as http:
        return str((await http.post("/threads", json={})).json()["thread_id"])


async def response_of(
    reader: asyncio.StreamReader, timeout: float = 5.0
) -> tuple[int, dict[str, str], dict[str, str]]:
    """Status, headers and JSON body of the one response on the connection."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), timeout)
    return int(lines[0].split(" ")[1]), headers, json.loads(body)


async def open_upload(
    api_url: str, thread: str, extra_headers: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = urlsplit(api_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(
        (
            f"POST /api/threads/{thread}/uploads HTTP/1.1\r\nHost: {url.netloc}\r\nx-api-key: tok-ana\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n{extra_headers}\r\n"
        ).encode()
    )
    await writer.drain()
    return reader, writer


def part_head(filename: str) -> bytes:
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()


async def test_a_declared_oversized_upload_is_refused_before_its_body_is_sent(
    api_url: str, thread: str
) -> None:
    reader, writer = await open_upload(api_url, thread, f"Content-Length: {300 * MB}\r\n")
    try:
        status, _, body = await response_of(reader)  # not a byte of the body sent
    finally:
        writer.close()
    assert status == 413
    assert body == {"detail": "an upload may carry at most 1 MB in all (gateway.max_upload_mb)"}


async def test_a_chunked_upload_is_refused_once_it_passes_the_limit(api_url: str, thread: str) -> None:
    reader, writer = await open_upload(api_url, thread, "Transfer-Encoding: chunked\r\n")
    chunk = b"x" * (64 * 1024)
    try:
        first = part_head("big.bin")
        writer.write(b"%x\r\n%s\r\n" % (len(first), first))
        for _ in range(LIMIT // len(chunk) + 4):  # a little past the limit, then the client waits
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        status, _, body = await response_of(reader)
    finally:
        writer.close()
    assert status == 413
    assert body == {"detail": "an upload may carry at most 1 MB in all (gateway.max_upload_mb)"}


async def test_json_bodies_are_limited_to_what_one_bus_message_carries(api_url: str) -> None:
    # the embedded nats-server's max_payload is 8 MB
    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}) as http:
        oversized = b" " * (8 * MB + 1)
        json_type = {"content-type": "application/json"}
        response = await http.post("/threads", content=oversized, headers=json_type)
    assert response.status_code == 413
    assert response.json() == {"detail": "a request body may be at most 8 MB (the NATS server's max_payload)"}


reads_everything = FastAPI()


@reads_everything.post("/api/threads/t/uploads")
async def read_all(request: Request) -> None:
    await request.body()


@pytest.mark.parametrize(
    "declared", [pytest.param(True, id="content-length"), pytest.param(False, id="chunked")]
)
async def test_the_middleware_reads_no_further_than_the_limit(declared: bool) -> None:
    """At the ASGI level: how much of a 300 MB body the app got to read before the 413."""
    handed_out = 0

    async def receive() -> Message:
        nonlocal handed_out
        handed_out += 64 * 1024
        return {"type": "http.request", "body": b"x" * (64 * 1024), "more_body": True}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    limit = BodyLimit("POST", re.compile(r"/api/threads/[^/]+/uploads"), LIMIT, "too big")
    middleware = BodyLimitMiddleware(reads_everything, limits=[limit], default_bytes=10, default_message="no")
    headers = [(b"content-length", str(300 * MB).encode())] if declared else []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/threads/t/uploads",
        "raw_path": b"/api/threads/t/uploads",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
    }
    await middleware(scope, receive, send)
    assert sent[0]["status"] == 413
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:])) == {"detail": "too big"}
    assert handed_out == (0 if declared else LIMIT + 64 * 1024)
