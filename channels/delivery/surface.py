"""How one platform shows a reply (`Surface`): what each adapter implements, and all the reply
stream (`channels.delivery.reply_stream`) asks of it. A platform says "wait", for one chat or for
all, by raising `channels.errors.RateLimited`.
"""

from __future__ import annotations

from typing import Any, Protocol

from bus.messages import FileRef, OutboundMessage


class Surface(Protocol):
    """How one platform shows a reply; each adapter implements it (and may inherit the defaults
    below by naming it as a base). Calls raise `RateLimited` when the platform asks to wait; any
    other error is a failed delivery (retried with backoff)."""

    #: Whether partial answers are shown as they stream (otherwise only the final one is posted).
    streams: bool = True

    def split(self, text: str) -> list[str]:
        """The text in pieces that each fit one message (at least one piece)."""
        ...

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """Send a new message answering `out`; what `edit` needs to change it later (JSON-able)."""
        ...

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        """Replace the text of a message `post` sent (unchanged text is not an error)."""
        ...

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        """Make the message `post` sent show the final `text` (the user sees `shown` now)."""
        if text != shown:
            await self.edit(ref, text)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        """A further piece of a final answer too long for one message, or a note about it."""
        await self.post(out, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        """Attach a file of the answer (`data`, read from the object store by `ReplyStream`)."""
        ...
