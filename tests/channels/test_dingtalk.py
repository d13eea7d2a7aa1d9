"""DingTalk end to end: our Stream loop against a fake DingTalk, through router and runner."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from channels.dingtalk import run as run_dingtalk
from config import AppConfig
from tests.channels.conftest import adapter_stack
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.openai_server import FakeOpenAI, Reply


@pytest_asyncio.fixture
async def dingtalk() -> AsyncIterator[FakeDingTalk]:
    async with FakeDingTalk() as fake:
        yield fake


@pytest_asyncio.fixture
async def stack(
    nats_url: str, dingtalk: FakeDingTalk, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AsyncIterator[AppConfig]:
    settings = {"client_id": "ding-id", "client_secret": "ding-secret", "base_url": dingtalk.base_url}
    async with adapter_stack(nats_url, config_data, app_config, "dingtalk", settings, run_dingtalk) as config:
        await dingtalk.wait(lambda: dingtalk.connections == 1)
        yield config


async def test_a_private_message_is_answered_in_markdown_through_the_session_webhook(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="**Hello** Ana, how can I help?"))
    frame = dingtalk.send_robot_message("hi there")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 1)
    conversation, body = dingtalk.replies[0]
    assert conversation == "cid-1"
    assert body["msgtype"] == "markdown"
    assert body["markdown"]["text"] == "**Hello** Ana, how can I help?"
    acked = [a for a in dingtalk.acks if a["headers"]["messageId"] == frame["headers"]["messageId"]]
    assert acked[0]["code"] == 200


async def test_retries_pings_groups_and_a_dropped_connection(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    dingtalk.send_robot_message("once", msg_id="m-1")
    dingtalk.send_robot_message("once", msg_id="m-1")  # DingTalk redelivering the same message
    dingtalk.send_robot_message("not for the bot", conversation="cid-g", group=True)
    ping = dingtalk.ping()
    dingtalk.send_robot_message("@bot please", conversation="cid-g", group=True, at_bot=True)
    await dingtalk.wait(lambda: len(dingtalk.replies) == 2)
    assert [c for c, _ in dingtalk.replies] == ["cid-1", "cid-g"]
    pong = next(a for a in dingtalk.acks if a["headers"]["messageId"] == ping)
    assert pong["code"] == 200

    dingtalk.drop_connection()
    await dingtalk.wait(lambda: dingtalk.connections == 2)
    dingtalk.send_robot_message("after the reconnect")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 3)
    asked = [r["messages"][-1]["content"] for r in fake_model.agent_requests]
    assert asked == ["once", "@bot please", "after the reconnect"]
