"""Feishu end to end: lark-oapi's long connection and REST client against a fake Feishu."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus, Misconfigured, list_dead_letters
from channels.feishu import message_text
from channels.feishu import run as run_feishu
from config import AppConfig
from tests.fakes.feishu_server import APP_ID, FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.support.adapters import file_in_file_out, the_agent_read


async def test_a_private_message_gets_one_card_patched_as_the_answer_streams(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="## Plan\nFirst **this**, then that.", chunk_delay=0.1))
    event = feishu.send_message("hello bot")
    user_message = event["event"]["message"]["message_id"]
    final = "**Plan**\nFirst **this**, then that."
    await feishu.wait(lambda: bool(feishu.cards()) and feishu.cards()[-1][1] == final)
    cards = feishu.cards()
    assert cards[0][0] == "reply", "the first card answers the user's message"
    assert [call for call, _ in cards[1:]] == ["patch"] * (len(cards) - 1), "then it is patched in place"
    assert len(cards) >= 3, "partial updates arrive while the answer streams"
    reply = feishu.calls[[c for c, _ in feishu.calls].index("reply")][1]
    assert reply["reply_to"] == user_message
    assert json.loads(reply["content"])["config"]["update_multi"] is True
    assert {p["message_id"] for c, p in feishu.calls if c == "patch"} == {reply["message_id"]}
    card_calls = [port for path, port in feishu.api_peers if path.startswith("/open-apis/im/v1/messages")]
    assert len(card_calls) == len(cards)
    assert len(set(card_calls)) == 1, "the card and its updates go over one kept connection"
    await feishu.wait(lambda: any(a["message_id"] for a in feishu.acks))
    assert [a["code"] for a in feishu.acks] == [200]
    assert unfenced(fake_model.agent_requests[0]["messages"][-1]["content"]) == "hello bot"


async def test_groups_answer_mentions_once_in_their_topic(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    feishu.send_message("lunch anyone?", chat_id="oc_group", chat_type="group")
    mention = feishu.send_message(
        "summarize the plan", chat_id="oc_group", chat_type="group", mention_bot=True, thread_id="omt_1"
    )
    feishu.send_event(mention)  # Feishu delivering the same event again
    feishu.send_event({"schema": "2.0", "header": {"event_type": "im.chat.member.bot.added_v1"}, "event": {}})
    feishu.send_message("and one in private", chat_id="oc_chat1")
    await feishu.wait(lambda: len([c for c, _ in feishu.calls if c == "reply"]) == 2)
    await feishu.wait(lambda: len(feishu.acks) == 5)
    asked = sorted(unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests)
    assert asked == ["and one in private", "summarize the plan"], "two chats, answered side by side"
    replies = {p["reply_to"]: p for c, p in feishu.calls if c == "reply"}
    in_topic = replies.pop(mention["event"]["message"]["message_id"])
    assert in_topic["reply_in_thread"] is True, "an answer in a topic stays in the topic"
    [private] = replies.values()
    assert not private.get("reply_in_thread")
    assert {a["code"] for a in feishu.acks} == {200}, "every event is acknowledged, unknown ones too"


async def test_a_file_in_and_a_presented_file_out(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    feishu.add_resource("file_v2_abc", b"- buy milk\n- call mum\n", "text/plain", "todo.txt")
    fake_model.script(*file_in_file_out("todo.txt", "plan.md", "# Plan\n", "Here is your plan."))
    feishu.send_message(message_type="file", content={"file_key": "file_v2_abc", "file_name": "todo.txt"})
    sent = await feishu.wait_for("file")
    assert sent[0]["file_name"] == "plan.md"
    assert feishu.uploads[sent[0]["file_key"]] == b"# Plan\n"
    await feishu.wait(lambda: any(p.get("msg_type") == "file" for c, p in feishu.calls if c == "reply"))
    file_reply = next(p for c, p in feishu.calls if c == "reply" and p.get("msg_type") == "file")
    assert json.loads(file_reply["content"]) == {"file_key": sent[0]["file_key"]}
    downloaded = await feishu.wait_for("resource")
    assert downloaded[0]["type"] == "file"
    the_agent_read(fake_model, "todo.txt", "- buy milk\n- call mum\n")


async def test_a_picture_in_and_a_presented_picture_out(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    feishu.add_resource("img_v3_xyz", b"\x89PNG fake", "image/png")
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("bash", {"command": "cp /mnt/user-data/uploads/*.png /mnt/user-data/outputs/c.png"})
            ]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/c.png"]})]),
        Reply(text="Same picture back."),
    )
    feishu.send_message(message_type="image", content={"image_key": "img_v3_xyz"}, chat_id="oc_pic")
    uploaded = await feishu.wait_for("image")
    assert uploaded[0]["image_type"] == "message"
    assert feishu.uploads[uploaded[0]["image_key"]] == b"\x89PNG fake"
    await feishu.wait(lambda: any(p.get("msg_type") == "image" for c, p in feishu.calls if c == "reply"))
    sent = next(p for c, p in feishu.calls if c == "reply" and p.get("msg_type") == "image")
    assert json.loads(sent["content"]) == {"image_key": uploaded[0]["image_key"]}
    assert (await feishu.wait_for("resource"))[0]["type"] == "image"
    assert ".png" in unfenced(fake_model.agent_requests[0]["messages"][-1]["content"])


async def test_the_long_connection_comes_back_after_a_drop(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig
) -> None:
    feishu.drop_connection()
    await feishu.wait(lambda: feishu.connections == 2)
    feishu.send_message("after the reconnect")
    await feishu.wait(lambda: bool(feishu.cards()))
    assert unfenced(fake_model.agent_requests[0]["messages"][-1]["content"]) == "after the reconnect"


async def test_an_event_that_cannot_be_read_is_acknowledged_dead_lettered_and_the_next_answered(
    feishu: FakeFeishu, fake_model: FakeOpenAI, feishu_stack: AppConfig, bus: Bus
) -> None:
    fake_model.script(Reply(text="Here."))
    feishu.send_message(content="{not json")
    feishu.send_message("are you there?")
    await feishu.wait(lambda: any(text == "Here." for _, text in feishu.cards()))
    letters = await list_dead_letters(bus)
    assert len(letters) == 1
    assert json.loads(letters[0].data)["event"]["message"]["content"] == "{not json", "the raw event"
    assert "JSONDecodeError" in letters[0].reason
    assert [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests] == ["are you there?"]
    await feishu.wait(lambda: len(feishu.acks) >= 2)
    assert {a["code"] for a in feishu.acks} == {200}, "acknowledged: Feishu does not send it again"


def test_rich_text_and_mentions_become_plain_text() -> None:
    post = {
        "zh_cn": {
            "title": "Weekly",
            "content": [
                [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " please read "}],
                [{"tag": "a", "text": "the doc", "href": "https://x.io"}, {"tag": "img", "image_key": "k"}],
            ],
        }
    }
    assert message_text("post", post, {"@_user_1": ""}) == "Weekly\nplease read\nthe doc"
    assert (
        message_text("text", {"text": "@_user_1 hi @_user_2"}, {"@_user_1": "", "@_user_2": "@Bo"})
        == "hi @Bo"
    )


async def test_wrong_app_credentials_stop_the_adapter_with_a_clear_error_retrying_cannot_fix(
    bus: Bus, feishu: FakeFeishu, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> None:
    config_data["channels"] = {
        "feishu": {"enabled": True, "app_id": APP_ID, "app_secret": "wrong", "domain": feishu.base_url}
    }
    with pytest.raises(Misconfigured, match="Feishu refused the app credentials"):
        await run_feishu(bus, app_config())
