"""An HTTP forward proxy on 127.0.0.1 that answers chat completions itself.

A client configured with `HTTP_PROXY` sends it absolute-form requests
(`POST http://host/v1/chat/completions HTTP/1.1`); the proxy records each target
and answers with a plain (non-streamed) OpenAI chat completion, as the model
behind it would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class AnsweringProxy:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.targets: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> AnsweringProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
            await reader.readexactly(length)
            self.targets.append(f"{method} {target}")
            body = json.dumps(
                {
                    "id": "chatcmpl-proxy",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": self.answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        finally:
            writer.close()
