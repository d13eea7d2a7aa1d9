"""Approvals from a chat: the request shown with `/approve` and `/deny`, answered where people are."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram


@pytest.fixture(autouse=True)
def bash_needs_approval(config_data: dict[str, Any]) -> None:
    config_data["approvals"] = {"enabled": True, "rules": [{"tools": ["bash"], "action": "ask"}]}


SENDS = ("sendMessage", "editMessageText")


async def sent_text(telegram: FakeTelegram, pattern: str, timeout: float = 20.0) -> re.Match[str]:
    """The first text the bot sent or edited that matches `pattern`, once it has."""
    texts: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                texts = [
                    str(p.get("text")) for m, p in telegram.calls if m in ("sendMessage", "editMessageText")
                ]
                for text in texts:
                    if found := re.search(pattern, text):
                        return found
                await _next_call(telegram)
    except TimeoutError:
        raise AssertionError(f"nothing sent matches {pattern!r}; sent: {texts}") from None


async def _next_call(telegram: FakeTelegram) -> None:
    seen = len(telegram.calls)
    while len(telegram.calls) == seen:
        telegram._new_call.clear()
        await telegram._new_call.wait()


async def test_a_bash_call_denied_from_telegram_is_not_run_and_the_model_reads_why(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo from-the-chat"})]),
        Reply(text="Fine, I left it alone.", when="not today"),
    )
    telegram.send_user_message("run the thing")
    asked = await sent_text(telegram, r"/approve (ap[0-9a-f]+)")
    approval_id = asked.group(1)
    assert await sent_text(telegram, "bash: echo from-the-chat")

    telegram.send_user_message(f"/deny {approval_id} not today")
    await sent_text(telegram, "Fine, I left it alone.")
    tool_result = fake_model.agent_requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "the user denied this call: not today" in tool_result["content"]

    # Answered already: a second answer finds nothing waiting and runs nothing.
    telegram.send_user_message(f"/approve {approval_id}")
    await sent_text(telegram, f"No approval {approval_id} waits here")
    assert "from-the-chat" not in str(
        [m for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "tool"]
    )
