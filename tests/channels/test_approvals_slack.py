"""Approvals on Slack: the request comes with Approve and Deny buttons (Block Kit); a press answers it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.slack_server import FakeSlack

pytestmark = pytest.mark.usefixtures("bash_needs_approval")


async def posted_buttons(slack: FakeSlack) -> list[dict[str, Any]]:
    """The buttons of the first message the bot posted or updated with some, once it has."""
    try:
        async with asyncio.timeout(20):
            while True:
                for method, params in list(slack.calls):
                    blocks = params.get("blocks") if method in ("chat.postMessage", "chat.update") else None
                    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                    for block in blocks or []:
                        if block.get("type") == "actions":
                            return list(block["elements"])
                seen = len(slack.calls)
                while len(slack.calls) == seen:
                    slack._new_call.clear()
                    await slack._new_call.wait()
    except TimeoutError:
        raise AssertionError(f"no buttons posted; calls: {slack.calls}") from None


async def test_a_bash_call_denied_with_slacks_button_is_not_run(
    slack: FakeSlack, fake_model: FakeOpenAI, slack_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo from-slack"})]),
        Reply(text="Not run, as you said.", when="the user denied this call"),
    )
    slack.send_event(
        {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": "U1",
            "text": "run it",
            "ts": "1.1",
        }
    )
    approve, deny = await posted_buttons(slack)
    assert approve["text"]["text"] == "Approve bash"
    assert deny["value"].startswith("/deny ap")

    slack.press_button(deny["value"])
    await fake_model.wait_for_requests(2)
    tool_result = fake_model.agent_requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "the user denied this call" in tool_result["content"]
    assert "from-slack" not in tool_result["content"]
