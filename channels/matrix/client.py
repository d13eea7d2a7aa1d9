"""The Matrix calls that show a reply (send, edit, upload) through matrix-nio, with the homeserver's
refusals told the way the reply stream reads them.

nio answers a call with a response or an error response, never an exception; here an error becomes
`RateLimited` (`M_LIMIT_EXCEEDED` with `retry_after_ms`: the homeserver limits the bot's account,
so every room waits), `MatrixError` (any other refusal) or `MatrixUnavailable` (no answer).
Messages are `m.text` with the model's Markdown as `body` and rendered to HTML (markdown-it-py,
CommonMark, raw HTML escaped) as `formatted_body`, which clients show; an edit is an `m.replace`
event whose `m.new_content` is the whole new text (clients show it in place of the original); a
message in a thread carries the `m.thread` relation to the thread's root.
"""

from __future__ import annotations

import io
from typing import Any

import aiohttp
import nio
from markdown_it import MarkdownIt

from channels.errors import PlatformError, PlatformUnavailable, RateLimited

_MARKDOWN = MarkdownIt("commonmark", {"html": False})  # the model's raw HTML is shown as text


def text_content(text: str) -> dict[str, Any]:
    """An `m.text` message's content: the Markdown, and the HTML clients render."""
    return {
        "msgtype": "m.text",
        "body": text,
        "format": "org.matrix.custom.html",
        "formatted_body": _MARKDOWN.render(text).strip(),
    }


class MatrixError(PlatformError):
    """The homeserver refused a call: its `errcode` and message."""

    def __init__(self, errcode: str | None, message: str, call: str) -> None:
        self.errcode = errcode
        super().__init__(f"the homeserver refused to {call}: {errcode} {message}")


class MatrixUnavailable(PlatformUnavailable):
    """The homeserver could not be reached, or failed: the reply is tried again."""


def thread_relation(thread: str | None, reply_to: str | None = None) -> dict[str, Any]:
    """The `m.relates_to` of a message in `thread` (and answering `reply_to`), if any."""
    if thread:
        relation: dict[str, Any] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True}
        if reply_to:
            relation["m.in_reply_to"] = {"event_id": reply_to}
        return {"m.relates_to": relation}
    if reply_to:
        return {"m.relates_to": {"m.in_reply_to": {"event_id": reply_to}}}
    return {}


async def send(client: nio.AsyncClient, room: str, content: dict[str, Any], call: str) -> str:
    """Send an `m.room.message` with `content`; its event id."""
    try:
        response = await client.room_send(room, "m.room.message", content)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise MatrixUnavailable(f"the homeserver could not be reached: {type(exc).__name__}: {exc}") from exc
    if isinstance(response, nio.RoomSendResponse):
        return str(response.event_id)
    raise _refusal(response, call)


async def post_text(
    client: nio.AsyncClient, room: str, text: str, thread: str | None = None, reply_to: str | None = None
) -> str:
    return await send(
        client, room, {"msgtype": "m.text", "body": text, **thread_relation(thread, reply_to)}, "send"
    )


async def edit_text(client: nio.AsyncClient, room: str, event: str, text: str) -> None:
    new = text_content(text)
    content = {
        **new,
        "body": f"* {text}",  # what clients that do not know edits show
        "formatted_body": f"* {new['formatted_body']}",
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event},
    }
    await send(client, room, content, "edit a message")


async def upload(client: nio.AsyncClient, name: str, data: bytes, content_type: str) -> str:
    """Put `data` in the homeserver's content repository; its `mxc://` URI."""
    try:
        response, _ = await client.upload(
            io.BytesIO(data), content_type=content_type, filename=name, filesize=len(data)
        )
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise MatrixUnavailable(f"the homeserver could not be reached: {type(exc).__name__}: {exc}") from exc
    if isinstance(response, nio.UploadResponse):
        return str(response.content_uri)
    raise _refusal(response, "upload a file")


def _refusal(response: Any, call: str) -> Exception:
    errcode = getattr(response, "status_code", None)
    message = str(getattr(response, "message", "") or response)
    if errcode == "M_LIMIT_EXCEEDED":
        seconds = (getattr(response, "retry_after_ms", None) or 1000) / 1000
        return RateLimited(seconds, f"the homeserver's rate limit ({call})", scope="platform")
    if errcode is None or str(errcode).startswith("5"):
        return MatrixUnavailable(f"the homeserver failed to {call}: {message}")
    return MatrixError(str(errcode), message, call)
