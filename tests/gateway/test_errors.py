"""Errors the gateway answers: a 500 keeps the client's keep-alive connection usable."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.asyncio


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str
) -> tuple[int, bytes]:
    """One GET on an open connection: its status and body (empty when the server closed instead)."""
    host = "127.0.0.1"
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Api-Key: tok-bob\r\n\r\n".encode())
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    except asyncio.IncompleteReadError:
        return 0, b""
    lines = head.decode().split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    return int(lines[0].split()[1]), await reader.readexactly(length)


async def test_after_a_500_the_same_connection_answers_the_next_request(api_url: str) -> None:
    # An operator's broken extensions_config.json: reading the MCP servers fails inside the handler.
    Path(os.environ["ANTLER_EXTENSIONS_CONFIG_PATH"]).write_text("{not json")  # noqa: ASYNC240
    url = httpx.URL(api_url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        status, body = await exchange(reader, writer, "/api/mcp/config")
        assert status == 500
        assert b"internal error (JSONDecodeError)" in body, "a short reason, no stack trace"
        status, body = await exchange(reader, writer, "/api/models")
        assert status == 200, "the keep-alive connection still works after the 500"
        assert b'"models"' in body
    finally:
        writer.close()
