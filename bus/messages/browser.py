"""The browser component's request and reply: `<prefix>.browser.act` (any browser process) and
`<prefix>.browser.thread.<token>` (the process holding that thread's page; `bus.subjects` has no
helper for it, `browser_thread_subject` below is the one place it is spelled)."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from bus.messages.base import Envelope, Reply
from bus.messages.sandbox import EgressPolicy

BrowserAction = Literal[
    "navigate",
    "snapshot",
    "click",
    "type",
    "scroll",
    "text",
    "links",
    "back",
    "screenshot",
    "close",
    "capture",
]
# Actions that start from nothing: any browser process may take them.
OPENING_ACTIONS = frozenset({"navigate", "capture"})


class BrowserRequest(Envelope):
    """One action on a thread's page (`capture`: a fresh page of its own, closed afterwards)."""

    user_id: str = "default"
    thread_id: str
    action: BrowserAction
    url: str | None = None
    ref: int | None = Field(None, description="click, type: an element's number in the latest snapshot")
    text: str | None = Field(None, description="type: the text entered")
    submit: bool = Field(False, description="type: press Enter afterwards")
    direction: Literal["down", "up"] = "down"
    full_page: bool = False
    filename: str | None = Field(None, description="screenshot, capture: the file's name under outputs")
    format: Literal["png", "jpeg", "pdf"] = "png"
    run_id: str | None = Field(None, description="The run asking, named in the log of refused connections.")
    egress: EgressPolicy | None = Field(
        None,
        description="The run's egress policy (access.egress), enforced by the browser for the page's every "
        "request; unset = public hosts (a person steering the page from the web UI).",
    )


class BrowserReply(Reply):
    """What the page shows now: `text` for the model; `saved` the outputs path of a file written."""

    url: str = ""
    title: str = ""
    text: str = ""
    saved: str | None = None
    frame: str | None = Field(
        None, description="the outputs path of the page's latest screenshot (live view)"
    )


def browser_thread_subject(prefix: str, user_id: str, thread_id: str) -> str:
    """The subject the process holding this thread's page listens on (a digest: one token, no ids)."""
    token = hashlib.sha256(f"{user_id}\0{thread_id}".encode()).hexdigest()[:32]
    return f"{prefix}.browser.thread.{token}"
