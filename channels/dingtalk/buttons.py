"""Buttons under a DingTalk reply (Approve, Deny under an approval request), as an ActionCard.

DingTalk robot messages carry buttons as an ActionCard: `msgtype: actionCard` on the session
webhook, `sampleActionCard2` to `sampleActionCard5` (that many buttons side by side) through the
robot API. Each button is a `dtmd://dingtalkclient/sendMessage?content=<command>` link: pressed,
the DingTalk client sends the command (`/approve <id>`) into the conversation as the presser's own
message, which reaches the robot like any message of theirs (in a group, as a message to the robot).
So a press needs no callback of its own, and typing the command does the same.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from bus.messages import ChatButton, OutboundMessage

MAX_BUTTONS = 5  # the robot API's action cards hold at most five


def send_link(command: str) -> str:
    """The link that makes the DingTalk client send `command` as the presser's message."""
    return "dtmd://dingtalkclient/sendMessage?content=" + quote(command, safe="")


def _buttons(out: OutboundMessage) -> list[ChatButton]:
    return list(out.buttons[:MAX_BUTTONS]) if out.buttons and out.is_final else []


def webhook_card(out: OutboundMessage, title: str, text: str) -> dict[str, Any] | None:
    """The session webhook's body for a final reply with buttons (None: it has none)."""
    buttons = _buttons(out)
    if not buttons:
        return None
    links = [{"title": b.label, "actionURL": send_link(b.command)} for b in buttons]
    return {
        "msgtype": "actionCard",
        "actionCard": {"title": title, "text": text, "btnOrientation": "1", "btns": links},
    }


def robot_card(out: OutboundMessage, title: str, text: str) -> tuple[str, dict[str, Any]] | None:
    """The robot API's (msgKey, msgParam) for a final reply with buttons (None: it has none)."""
    buttons = _buttons(out)
    if not buttons:
        return None
    if len(buttons) == 1:
        single = {"singleTitle": buttons[0].label, "singleURL": send_link(buttons[0].command)}
        return "sampleActionCard", {"title": title, "text": text, **single}
    param: dict[str, Any] = {"title": title, "text": text}
    for number, button in enumerate(buttons, 1):
        param[f"actionTitle{number}"] = button.label
        param[f"actionURL{number}"] = send_link(button.command)
    return f"sampleActionCard{len(buttons)}", param
