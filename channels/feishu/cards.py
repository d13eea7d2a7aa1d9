"""Feishu's reply cards: the Markdown card every answer is, its buttons (Approve, Deny under an
approval request), and what a press becomes.

A final reply with buttons gets an `action` element under its Markdown, one button per
`ChatButton`; each button's `value` carries its command (`/approve <id>`) and the reply's topic.
Feishu sends a press as a `card.action.trigger` event (card callbacks, version 2) down the same
long connection as messages; it becomes the presser's message in the chat the card is in, as if
they had typed the command (`/approve` and `/deny` typed by hand work as well). The chat comes from
the event's context, the person from its operator: a value can only name a topic of that chat.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bus.messages import InboundMessage, OutboundMessage

BUTTON_EVENT = "card.action.trigger"


def card(text: str, extra: list[dict[str, Any]] | None = None) -> str:
    """An interactive card holding `text` as Markdown (then `extra` elements: buttons), updatable in
    place by the bot."""
    content = re.sub(r"^#{1,6}\s+(.+)$", r"**\1**", text, flags=re.MULTILINE)  # no headings in cards
    return json.dumps(
        {
            "config": {"wide_screen_mode": True, "update_multi": True},
            "elements": [{"tag": "markdown", "content": content}, *(extra or [])],
        },
        ensure_ascii=False,
    )


def button_elements(out: OutboundMessage) -> list[dict[str, Any]]:
    """The card elements for a final reply's buttons (none for other replies)."""
    if not out.buttons or not out.is_final:
        return []
    topic = {"topic": out.topic_id} if out.topic_id else {}
    actions = [
        {
            "tag": "button",
            "text": {"tag": "plain_text", "content": button.label},
            "type": "danger" if button.command.startswith("/deny") else "primary",
            "value": {"command": button.command, **topic},
        }
        for button in out.buttons
    ]
    return [{"tag": "action", "actions": actions}]


def pressed(event: dict[str, Any]) -> InboundMessage | None:
    """A `card.action.trigger` event as the presser's message; None if it is not one of ours.

    Raises:
        ValueError, KeyError, TypeError: an event that cannot be read (it is dead-lettered).
    """
    body = event["event"]
    value = (body.get("action") or {}).get("value") or {}
    if isinstance(value, str):  # a value set as JSON text
        value = json.loads(value)
    command = str(value.get("command") or "").strip()
    operator = body.get("operator") or {}
    user = str(operator.get("open_id") or operator.get("user_id") or "")
    chat_id = str((body.get("context") or {}).get("open_chat_id") or "")
    if not command.startswith("/") or not user or not chat_id:
        return None
    pressed_id = (event.get("header") or {}).get("event_id") or body.get("token") or ""
    return InboundMessage(
        channel="feishu",
        chat_id=chat_id,
        user_id=user,
        message_id=f"button-{pressed_id}",
        topic_id=str(value.get("topic") or "") or None,
        chat_type="group",  # the event does not say; a press addresses the bot wherever it is
        mentioned=True,
        text=command,
    )
