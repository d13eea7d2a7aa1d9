"""WeCom end to end: the adapter's callback URL and WeCom's app message API (a fake written from
WeCom's documentation), through router and runner, as `antler up` runs them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from bus import Bus, list_dead_letters
from channels.wecom import run as run_wecom
from config import AppConfig
from tests.channels.weixin import an_expired_token_is_fetched_again, asked, the_retry_ran_nothing
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.wecom_server import TEXT_BYTES, FakeWeCom
from tests.support.adapters import StartAdapter
from tests.support.ports import free_port


@pytest_asyncio.fixture
async def stack(wecom: FakeWeCom, start_adapter: StartAdapter) -> AsyncIterator[AppConfig]:
    async with start_adapter("wecom", wecom.settings(free_port()), run_wecom) as config:
        await wecom.wait_for("gettoken")
        yield config


async def test_the_url_check_gets_the_decrypted_echostr_and_a_forged_one_is_refused(
    wecom: FakeWeCom, stack: AppConfig
) -> None:
    answer, echo = await wecom.check_url()
    assert answer.status_code == 200
    assert answer.text == echo
    forged, _ = await wecom.check_url(forged=True)
    assert forged.status_code == 403


async def test_an_encrypted_text_message_is_taken_at_once_and_answered_through_the_app_api(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(Reply(text="你好 Zhang, how can I help?"))
    answer, _ = await wecom.send_text("hi there")
    assert answer.status_code == 200
    assert answer.text == "", "the callback is answered at once, empty; the answer comes by API"
    sent = await wecom.wait_for("message/send")
    assert sent[0]["touser"] == "zhangsan"
    assert sent[0]["agentid"] == wecom.agent_id
    assert sent[0]["text"]["content"] == "你好 Zhang, how can I help?"
    assert asked(fake_model) == ["hi there"]


async def test_a_forged_signature_is_refused_and_nothing_reaches_the_bus(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    xml, _ = wecom.message_xml("text", Content="forged")
    refused = await wecom.deliver(xml, forged=True)
    assert refused.status_code == 403
    await wecom.send_text("genuine")
    await wecom.wait_for("message/send")
    assert asked(fake_model) == ["genuine"]
    assert await list_dead_letters(bus) == [], "a forged request is refused, not kept"


async def test_a_retry_of_the_same_msgid_is_answered_once(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    xml, _ = wecom.message_xml("text", Content="hello")
    first = await wecom.deliver(xml)
    again = await wecom.deliver(xml)  # WeCom sending it again, as after a slow answer
    assert (first.status_code, again.status_code) == (200, 200)
    await the_retry_ran_nothing(wecom, fake_model, "message/send")


async def test_an_expired_access_token_is_fetched_again_and_the_answer_arrives(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    await an_expired_token_is_fetched_again(wecom, fake_model, "message/send", "gettoken")


async def test_a_long_answer_comes_in_pieces_that_fit_wecoms_limit(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    text = "\n\n".join(f"第{n}段：" + "长" * 300 for n in range(12))  # ~11 KB of UTF-8
    fake_model.script(Reply(text=text))
    await wecom.send_text("write a lot")
    await wecom.wait(lambda: "".join(wecom.texts()).count("段") == 12, timeout=30)
    pieces = wecom.texts()
    assert len(pieces) >= 6
    assert all(len(piece.encode()) <= TEXT_BYTES for piece in pieces)
    assert "\n\n".join(pieces) == text
    assert not wecom.refusals


async def test_a_picture_in_and_a_file_out(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    picture = wecom.add_media("image", "whiteboard.jpg", b"\xff\xd8\xff\xe0 a picture")
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/plan.md", "content": "# Plan\n"})
            ]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/plan.md"]})]),
        Reply(text="Here is your plan."),
    )
    xml, _ = wecom.message_xml("image", PicUrl="http://127.0.0.1:1/pic.jpg", MediaId=picture)
    answer = await wecom.deliver(xml)
    assert answer.status_code == 200
    await wecom.wait(lambda: any(s["msgtype"] == "file" for s in wecom.sent), timeout=30)
    assert wecom.texts() == ["Here is your plan."]
    file_message = next(s for s in wecom.sent if s["msgtype"] == "file")
    kind, name, data = wecom.media[file_message["file"]["media_id"]]
    assert (kind, name, data) == ("file", "plan.md", b"# Plan\n")
    assert "/mnt/user-data/uploads/whiteboard.jpg" in asked(fake_model)[0]


async def test_malformed_messages_are_dead_lettered_with_a_reason_and_the_next_is_answered(
    wecom: FakeWeCom, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    broken = await wecom.deliver("<xml><ToUserName>oops</ToUser")
    no_content, _ = wecom.message_xml("text")
    empty = await wecom.deliver(no_content)
    assert (broken.status_code, empty.status_code) == (200, 200), "taken: WeCom must not send them again"
    await wecom.send_text("a good one")
    await wecom.wait_for("message/send")
    reasons = [letter.reason for letter in await list_dead_letters(bus)]
    assert len(reasons) == 2
    assert any("not XML" in reason for reason in reasons)
    assert any(reason.endswith("a text message without Content") for reason in reasons)
    assert all(reason.startswith("unreadable wecom message") for reason in reasons)
    assert asked(fake_model) == ["a good one"]
