"""DingTalk end to end: our Stream loop against a fake DingTalk, through router and runner."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from channels.dingtalk import MAX_PARAM_BYTES, DingTalkAdapter
from channels.dingtalk import run as run_dingtalk
from config import AppConfig
from tests.fakes.dingtalk_server import FakeDingTalk
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.support.adapters import StartAdapter, file_in_file_out, the_agent_read


@pytest.fixture
def settings(dingtalk: FakeDingTalk) -> dict[str, Any]:
    return {"client_id": "ding-id", "client_secret": "ding-secret", "base_url": dingtalk.base_url}


@pytest_asyncio.fixture
async def stack(
    dingtalk: FakeDingTalk, settings: dict[str, Any], start_adapter: StartAdapter
) -> AsyncIterator[AppConfig]:
    async with start_adapter("dingtalk", settings, run_dingtalk) as config:
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
    asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    assert sorted(asked[:2]) == ["@bot please", "once"]
    assert asked[2:] == ["after the reconnect"]


async def test_a_file_in_a_file_out_and_an_expired_webhook(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    dingtalk.add_file("code-1", b"- buy milk\n- call mum\n", "text/plain")
    fake_model.script(*file_in_file_out("todo.txt", "plan.md", "# Plan\n", "Here is your plan."))
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
    the_agent_read(fake_model, "todo.txt", "- buy milk\n- call mum\n")


async def test_send_too_fast_inside_a_200_is_waited_out_and_the_reply_arrives(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    fake_model.script(Reply(text="Eventually."))
    dingtalk.webhook_errcodes = [130101]  # HTTP 200, errcode 130101: "send too fast"
    dingtalk.send_robot_message("hello?")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 1, timeout=30)
    assert dingtalk.replies[0][1]["markdown"]["text"] == "Eventually."
    assert len(dingtalk.webhook_refusals) == 1
    assert await list_dead_letters(bus) == []


async def test_malformed_robot_messages_are_acked_and_dead_lettered_with_a_reason(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    not_json = dingtalk.send_robot_message("", raw_data="{not json")
    no_text = dingtalk.send_robot_message(
        "", raw_data=json.dumps({"conversationId": "cid-1", "msgId": "m-9", "msgtype": "text"})
    )
    dingtalk.send_robot_message("a good one")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 1)
    codes = {a["headers"]["messageId"]: a["code"] for a in dingtalk.acks}
    assert codes[not_json["headers"]["messageId"]] == 200, "acked: DingTalk must not send it again"
    assert codes[no_text["headers"]["messageId"]] == 200
    reasons = sorted(letter.reason for letter in await list_dead_letters(bus))
    assert len(reasons) == 2
    assert "without text" in reasons[0]
    assert "not JSON" in reasons[1]
    assert [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests] == ["a good one"]


async def test_a_frame_that_is_not_a_json_object_keeps_the_connection(
    dingtalk: FakeDingTalk, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    dingtalk.send_frame([1, 2, 3])
    dingtalk.send_frame("42")
    dingtalk.send_robot_message("still there?")
    await dingtalk.wait(lambda: len(dingtalk.replies) == 1)
    assert dingtalk.connections == 1, "the stream was not dropped"


def test_pieces_fit_the_robot_apis_byte_limit() -> None:
    text = "长" * 20_000  # three bytes a character
    pieces = DingTalkAdapter.split(object.__new__(DingTalkAdapter), text)
    assert "".join(pieces) == text
    assert all(len(json.dumps({"text": p}, ensure_ascii=False).encode()) < MAX_PARAM_BYTES for p in pieces)


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
