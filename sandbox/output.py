"""A command's output as the model gets it: the head and the tail, and how much fell between."""

from __future__ import annotations

import asyncio


class Collector:
    """Keeps the head and the tail of a stream, counting what falls between."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    async def read(self, stream: asyncio.StreamReader) -> None:
        half = self.limit // 2
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            room = half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > half:
                    del self.tail[: len(self.tail) - half]

    def text(self) -> tuple[str, int]:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if cut <= 0:
            return head + tail, 0
        return f"{head}\n[... output truncated: {cut} bytes cut ...]\n{tail}", cut
