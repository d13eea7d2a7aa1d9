"""Files the agent presents, into a personal chat: Teams' file consent flow.

A bot cannot attach a file to a message (pictures excepted, inline). In a personal chat it asks
first, with a file consent card naming the file and its size; when the user accepts, Teams sends
an `invoke` named `fileConsent/invoke` with an upload URL in the user's OneDrive, the bot puts the
file there (`PUT`, with `Content-Range`) and sends a file info card that opens it. The card's
context names the file in our object store, so any copy of the adapter can upload it later.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from microsoft_agents.activity import Attachment

from bus import Bus
from bus.messages import FileRef

log = logging.getLogger(__name__)

CONSENT = "application/vnd.microsoft.teams.card.file.consent"
FILE_INFO_CARD = "application/vnd.microsoft.teams.card.file.info"
INVOKE = "fileConsent/invoke"


def consent_card(file: FileRef, size: int) -> Attachment:
    """The card asking the user to accept `file` (`size` bytes)."""
    context = {"object": file.object_name, "name": file.name}
    return Attachment(
        content_type=CONSENT,
        name=file.name,
        content={
            "description": f"{file.name}, made for you",
            "sizeInBytes": size,
            "acceptContext": context,
            "declineContext": context,
        },
    )


async def upload_accepted(bus: Bus, http: httpx.AsyncClient, value: Any) -> Attachment | None:
    """For an accepted consent (an invoke's `value`): the file uploaded where Teams said, and the
    file info card to show it; None when the user declined."""
    if not isinstance(value, dict) or value.get("action") != "accept":
        return None
    context = value.get("context") or {}
    upload = value.get("uploadInfo") or {}
    if not context.get("object") or not upload.get("uploadUrl"):
        raise ValueError("a file consent without the file or its upload URL")
    stored = await (await bus.files()).get(str(context["object"]))
    data = stored.data or b""
    size = len(data)
    headers = {"Content-Range": f"bytes 0-{max(size - 1, 0)}/{size}"}
    response = await http.put(str(upload["uploadUrl"]), content=data, headers=headers)
    response.raise_for_status()
    log.info("msteams: uploaded %s (%d bytes) to the user's OneDrive", context.get("name"), size)
    return Attachment(
        content_type=FILE_INFO_CARD,
        content_url=upload.get("contentUrl"),
        name=upload.get("name") or context.get("name"),
        content={"uniqueId": upload.get("uniqueId"), "fileType": upload.get("fileType")},
    )
