"""Whole tool outputs saved for the agent under its thread's outputs, through the sandbox broker.

The tool output budget (agents.middleware.tool_output) keeps only the head and
tail of a long result in the conversation; the whole text goes to
`/mnt/user-data/outputs/tool-results/<tool>-<id>.txt`, where the agent's own
`read_file` and `grep` reach it. It is written in pieces (each one request well
under the bus's largest message), the first creating the file, the next ones
appending, so a result of many megabytes needs no bigger messages.
"""

from __future__ import annotations

import re
import uuid

from bus import Bus
from bus.layout import OUTPUTS
from sandbox.client import SandboxClient

TOOL_RESULTS = f"{OUTPUTS}/tool-results"
PIECE_CHARS = 256 * 1024  # characters per write request (at most 4 bytes each, JSON-escaped: < 8 MiB)


def result_path(tool_name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tool_name).strip("._") or "tool"
    return f"{TOOL_RESULTS}/{safe[:60]}-{uuid.uuid4().hex[:12]}.txt"


class ToolOutputFiles:
    """`save(user, thread, tool, text) -> path`: the budget's `SaveOutput`, bound to one bus connection.

    Raises (from save):
        sandbox.errors.SandboxError: the broker refused (quota, size) or is not running.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def __call__(self, user_id: str, thread_id: str, tool_name: str, text: str) -> str:
        path = result_path(tool_name)
        client = SandboxClient(self.bus, user_id, thread_id, timeout=60.0)
        for start in range(0, max(len(text), 1), PIECE_CHARS):
            await client.write_file(path, text[start : start + PIECE_CHARS], append=start > 0)
        return path
