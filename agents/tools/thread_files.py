"""The thread's files as the runner side's middlewares need them, through the sandbox broker.

`save_output`: the tool output budget (agents.graph.middleware.tool_output) keeps only
the head and tail of a long result in the conversation; the whole text goes to
`/mnt/user-data/outputs/tool-results/<tool>-<id>.txt`, where the agent's own
`read_file` and `grep` reach it. It is written in pieces (each one request well
under the bus's largest message), the first creating the file, the next ones
appending, so a result of many megabytes needs no bigger messages.

`exists`: whether a path is a file already (read before write,
agents.graph.middleware.read_before_write), or None when the broker cannot say.
"""

from __future__ import annotations

import logging
import re
import uuid

from bus import Bus
from bus.layout import OUTPUTS
from sandbox.client import SandboxClient
from sandbox.errors import NotFound, SandboxError

log = logging.getLogger(__name__)

TOOL_RESULTS = f"{OUTPUTS}/tool-results"
PIECE_CHARS = 256 * 1024  # characters per write request (at most 4 bytes each, JSON-escaped: < 8 MiB)


def result_path(tool_name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tool_name).strip("._") or "tool"
    return f"{TOOL_RESULTS}/{safe[:60]}-{uuid.uuid4().hex[:12]}.txt"


class ThreadFiles:
    """A thread's files for middlewares, bound to one bus connection."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def save_output(self, user_id: str, thread_id: str, tool_name: str, text: str) -> str:
        """Save a tool's whole output; returns the path the agent reads it at.

        Raises:
            sandbox.errors.SandboxError: the broker refused (quota, size) or is not running.
        """
        path = result_path(tool_name)
        client = SandboxClient(self.bus, user_id, thread_id, timeout=60.0)
        for start in range(0, max(len(text), 1), PIECE_CHARS):
            await client.write_file(path, text[start : start + PIECE_CHARS], append=start > 0)
        return path

    async def exists(self, user_id: str, thread_id: str, path: str) -> bool | None:
        """True: `path` is an existing file; False: nothing is there; None: the broker could not say."""
        try:
            await SandboxClient(self.bus, user_id, thread_id).read_file(path, 1, 1)
        except NotFound:
            return False
        except SandboxError as exc:  # outside the sandbox, a folder, a binary file: the tool itself says
            log.debug("thread %s: cannot tell whether %s exists: %s", thread_id, path, exc)
            return None
        return True
