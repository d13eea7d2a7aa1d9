"""The agent schedules a task when asked in words: the confirmation in its reply, the answers in that chat."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.chat import Chat, running_router
from tests.support.runner import running_runner
from tests.support.schedules import running_scheduler

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stack(nats_url: str, app_config: Callable[[], AppConfig]) -> AsyncIterator[AppConfig]:
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_router(nats_url, config),
        running_scheduler(nats_url, config),
    ):
        yield config


async def test_asked_in_words_the_agent_schedules_a_task_that_answers_in_the_same_chat(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("schedule_task", {"when": "every 2s", "prompt": "stretch your legs"})]),
    )
    fake_model.script(Reply(text="Done, I will remind you.", when="Scheduled every 2s"))
    async with Chat(bus) as chat:
        await chat.say("remind me every 2 seconds to stretch my legs", chat_id="desk")
        confirmed = await chat.final()
        assert confirmed.text == "Done, I will remind you."
        tool_answer = [m for m in fake_model.agent_requests[1]["messages"] if m.get("role") == "tool"]
        assert "Scheduled every 2s: stretch your legs" in str(tool_answer[-1]["content"])
        assert "I will answer in this chat" in str(tool_answer[-1]["content"])
        reminder = await chat.final(timeout=60)
        assert reminder.chat_id == "desk"
        assert reminder.text == "You said: stretch your legs"
        await chat.say("/unschedule 1", chat_id="desk")
        while "Removed #1" not in (await chat.final()).text:  # scheduled answers may come first
            pass
