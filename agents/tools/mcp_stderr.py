"""A stdio MCP server's stderr: kept out of Antler's own log stream, its last lines kept.

A stdio server started with the default `errlog` writes its logs into the terminal
Antler logs to, and when it fails to start, all the MCP client knows is "Connection
closed". Its stderr goes into a pipe read on the event loop (no thread): every line
is logged at DEBUG under the server's name and the last few are kept, so a failed
start can say what the server said.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from typing import TextIO

log = logging.getLogger(__name__)

KEEP_LINES = 8
LINE_CHARS = 400


class _Lines(asyncio.Protocol):
    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: deque[str] = deque(maxlen=KEEP_LINES)
        self._partial = b""

    def data_received(self, data: bytes) -> None:
        *whole, self._partial = (self._partial + data).split(b"\n")
        self._partial = self._partial[-LINE_CHARS * 4 :]  # a line that never ends stays bounded
        for raw in whole:
            text = raw.decode(errors="replace").rstrip()
            if text:
                self.lines.append(text[:LINE_CHARS])
                log.debug("MCP server %s: %s", self.name, text)

    def eof_received(self) -> bool | None:
        if self._partial.strip():
            self.lines.append(self._partial.decode(errors="replace").strip()[:LINE_CHARS])
        self._partial = b""
        return None


class StderrTail:
    """`writer` is the file to give the server as its stderr; `last()` what it wrote last."""

    def __init__(self, writer: TextIO, transport: asyncio.ReadTransport, lines: _Lines) -> None:
        self.writer = writer
        self._transport = transport
        self._lines = lines

    @classmethod
    async def open(cls, name: str) -> StderrTail:
        read_fd, write_fd = os.pipe()
        lines = _Lines(name)
        reader = os.fdopen(read_fd, "rb", buffering=0)
        try:
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: lines, reader)
        except BaseException:
            reader.close()
            os.close(write_fd)
            raise
        return cls(os.fdopen(write_fd, "w"), transport, lines)

    async def last(self) -> str:
        """The server's last lines, once what it wrote before exiting has been read."""
        with contextlib.suppress(Exception):
            self.writer.close()  # our copy: the pipe ends when the server's copy closes too
        for _ in range(20):  # a few turns of the loop for the last bytes, no waiting on a live server
            if self._transport.is_closing():
                break
            await asyncio.sleep(0.01)
        return " | ".join(self._lines.lines)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        self._transport.close()
