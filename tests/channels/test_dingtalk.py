"""DingTalk end to end: our Stream loop against a fake DingTalk, through router and runner."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from channels.dingtalk import run as run_dingtalk
from config import AppConfig
from tests.channels.conftest import adapter_stack
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall


@pytest_asyncio.fixture
async def dingtalk() -> AsyncIterator[FakeDingTalk]:
    async with FakeDingTalk() as fake:
        yield fake


@pytest.fixture
def settings(dingtalk: FakeDingTalk) -> dict[str, Any]:
    return {"client_id": "ding-id", "client_secret": "ding-secret", "base_url": dingtalk.base_url}


@pytest_asyncio.fixture
async def stack(
    nats_url: str,
    dingtalk: FakeDingTalk,
    settings: dict[str, Any],
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> AsyncIterator[AppConfig]:
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
    assert sorted(c for c, _ in dingtalk.replies) == ["cid-1", "cid-g"], "chats are answered side by side"
    pong = next(a for a in dingtalk.acks if a["headers"]["messageId"] == ping)
    assert pong["code"] == 200

    dingtalk.drop_connection()
    await dingtalk.wait(lambda: dingtalk.connections == 2)
    dingtalk.send_robot_message("after the reconnect")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 3)
    asked = [r["messages"][-1]["content"] for r in fake_model.agent_requests]
    assert sorted(asked[:2]) == ["@bot please", "once"]
    assert asked[2:] == ["after the reconnect"]


async def test_a_file_in_a_file_out_and_an_expired_webhook(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    dingtalk.add_file("code-1", b"- buy milk\n- call mum\n", "text/plain")
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/todo.txt"})]),
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/plan.md", "content": "# Plan\n"})
            ]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/plan.md"]})]),
        Reply(text="Here is your plan."),
    )
    dingtalk.send_robot_message(
        msgtype="file",
        content={"downloadCode": "code-1", "fileName": "todo.txt"},
        webhook_expired=True,
        text="",
    )
    sent = await dingtalk.wait_for("/v1.0/robot/oToMessages/batchSend", count=2)
    assert [s["msgKey"] for s in sent] == ["sampleMarkdown", "sampleFile"]
    assert sent[0]["userIds"] == ["staff-7"]
    assert sent[0]["robotCode"] == "robot-1"
    assert json.loads(sent[0]["msgParam"])["text"] == "Here is your plan."
    media = json.loads(sent[1]["msgParam"])
    assert media["fileName"] == "plan.md"
    assert dingtalk.uploads[media["mediaId"]] == b"# Plan\n"
    assert not dingtalk.replies, "an expired session webhook is not used"
    assert "/mnt/user-data/uploads/todo.txt" in fake_model.agent_requests[0]["messages"][-1]["content"]
    assert fake_model.agent_requests[1]["messages"][-1]["content"] == "- buy milk\n- call mum\n"


class TestAICards:
    @pytest.fixture
    def settings(self, dingtalk: FakeDingTalk) -> dict[str, Any]:
        return {
            "client_id": "ding-id",
            "client_secret": "ding-secret",
            "base_url": dingtalk.base_url,
            "card_template_id": "tpl-1.schema",
        }

    async def test_an_answer_streams_into_one_card_that_is_then_finished(
        self, dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
    ) -> None:
        fake_model.script(Reply(text="First this, then that, and done.", chunk_delay=0.1))
        dingtalk.send_robot_message("plan my day")
        finished = await dingtalk.wait_for("/v1.0/card/instances")
        created = await dingtalk.wait_for("/v1.0/card/instances/createAndDeliver")
        assert len(created) == 1
        assert created[0]["cardTemplateId"] == "tpl-1.schema"
        assert created[0]["openSpaceId"] == "dtv1.card//IM_ROBOT.staff-7"
        streamed = [p for c, p in dingtalk.calls if c == "/v1.0/card/streaming"]
        assert len(streamed) >= 2, "partial answers stream into the card"
        assert {p["outTrackId"] for p in streamed} == {created[0]["outTrackId"]}
        assert streamed[-1]["content"] == "First this, then that, and done."
        assert [p["isFinalize"] for p in streamed] == [False] * (len(streamed) - 1) + [True]
        assert finished[0]["cardData"]["cardParamMap"] == {
            "content": "First this, then that, and done.",
            "flowStatus": "3",
        }
        assert not dingtalk.replies, "no Markdown reply besides the card"

    async def test_a_card_that_cannot_be_created_falls_back_to_markdown(
        self, dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
    ) -> None:
        dingtalk.refuse_cards = True
        fake_model.script(Reply(text="Still answered.", chunk_delay=0.05))
        dingtalk.send_robot_message("hello", conversation="cid-g", group=True, at_bot=True)
        await dingtalk.wait(lambda: len(dingtalk.replies) == 1)
        assert dingtalk.replies[0][1]["markdown"]["text"] == "Still answered."
        created = [p for c, p in dingtalk.calls if c == "/v1.0/card/instances/createAndDeliver"]
        assert created[0]["openSpaceId"] == "dtv1.card//IM_GROUP.cid-g"
