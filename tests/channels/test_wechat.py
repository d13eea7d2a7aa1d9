"""WeChat Official Accounts end to end: the adapter's callback URL, passive replies and the
customer-service message API (a fake written from the Official Accounts documentation), through
router and runner, as `antler up` runs them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from bus import Bus, list_dead_letters
from channels.wechat import run as run_wechat
from config import AppConfig
from tests.channels.weixin import an_expired_token_is_fetched_again, asked, the_retry_ran_nothing
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.wechat_server import TEXT_BYTES, FakeWeChat
from tests.support.adapters import StartAdapter
from tests.support.ports import free_port


@pytest.fixture
def passive_seconds() -> float:
    return 4.0


@pytest_asyncio.fixture
async def stack(
    wechat: FakeWeChat, passive_seconds: float, start_adapter: StartAdapter
) -> AsyncIterator[AppConfig]:
    settings = wechat.settings(free_port(), passive_reply_seconds=passive_seconds)
    async with start_adapter("wechat", settings, run_wechat) as config:
        await wechat.wait_for("token")
        yield config


async def test_the_url_check_echoes_and_a_forged_one_is_refused(wechat: FakeWeChat, stack: AppConfig) -> None:
    answer, echo = await wechat.check_url()
    assert (answer.status_code, answer.text) == (200, echo)
    forged, _ = await wechat.check_url(forged=True)
    assert forged.status_code == 403


@pytest.mark.parametrize("safe", [pytest.param(False, id="plain"), pytest.param(True, id="safe-mode")])
async def test_an_answer_ready_in_time_is_the_passive_reply(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig, safe: bool
) -> None:
    fake_model.script(Reply(text="Quick answer."))
    answer = await wechat.send_text("hi there", safe=safe)
    assert answer.status_code == 200
    assert wechat.passive == [
        {
            "ToUserName": "o-user-1",
            "FromUserName": wechat.account,
            "CreateTime": wechat.passive[0]["CreateTime"],
            "MsgType": "text",
            "Content": "Quick answer.",
        }
    ]
    assert not wechat.sent, "no customer-service message besides the passive reply"
    assert asked(fake_model) == ["hi there"]


@pytest.mark.parametrize("passive_seconds", [0.5])
async def test_a_slow_answer_is_sent_through_the_customer_service_api(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    thinking = asyncio.Event()
    fake_model.script(Reply(text="Worth the wait.", hold=thinking))
    answer = await wechat.send_text("a hard question", safe=True)
    assert (answer.status_code, answer.text) == (200, "success"), "WeChat is answered before its deadline"
    thinking.set()
    sent = await wechat.wait_for("message/custom/send")
    assert sent[0] == {"touser": "o-user-1", "msgtype": "text", "text": {"content": "Worth the wait."}}
    assert not wechat.passive


async def test_a_forged_signature_is_refused_and_nothing_reaches_the_bus(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    xml, _ = wechat.message_xml("text", Content="forged")
    refused = await wechat.deliver(xml, forged=True)
    assert refused.status_code == 403
    refused_safe = await wechat.deliver(xml, forged=True, safe=True)
    assert refused_safe.status_code == 403
    await wechat.send_text("genuine")
    await wechat.wait(lambda: len(wechat.passive) == 1)
    assert asked(fake_model) == ["genuine"]
    assert await list_dead_letters(bus) == []


@pytest.mark.parametrize("passive_seconds", [0.0])
async def test_a_retry_of_the_same_msgid_is_answered_once(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    xml, _ = wechat.message_xml("text", Content="hello")
    first = await wechat.deliver(xml)
    again = await wechat.deliver(xml)  # WeChat trying again, as after a slow callback
    assert (first.text, again.text) == ("success", "success")
    await the_retry_ran_nothing(wechat, fake_model, "message/custom/send")


@pytest.mark.parametrize("passive_seconds", [0.0])
async def test_an_expired_access_token_is_fetched_again(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    await an_expired_token_is_fetched_again(wechat, fake_model, "message/custom/send", "token")


async def test_a_long_answer_starts_passively_and_continues_by_api_within_the_limit(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    text = "\n\n".join(f"Part {n}: " + "词" * 400 for n in range(8))
    fake_model.script(Reply(text=text))
    await wechat.send_text("write a lot")
    await wechat.wait(lambda: len(wechat.passive) == 1 and "".join(wechat.texts()).count("Part") == 7)
    pieces = [wechat.passive[0]["Content"], *wechat.texts()]
    assert all(len(piece.encode()) <= TEXT_BYTES for piece in pieces)
    assert "\n\n".join(pieces) == text
    assert not wechat.refusals


@pytest.mark.parametrize("passive_seconds", [0.0])
async def test_a_picture_in_a_picture_out_and_a_file_becomes_a_note(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    picture = wechat.add_media("image", "receipt.jpg", b"\xff\xd8\xff\xe0 a receipt")
    png = "iVBORw0KGgo="  # a PNG's signature, base64
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("bash", {"command": f"echo {png} | base64 -d > /mnt/user-data/outputs/c.png"})
            ]
        ),
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/notes.md", "content": "# N\n"})
            ]
        ),
        Reply(
            tool_calls=[
                ToolCall(
                    "present_files",
                    {"filepaths": ["/mnt/user-data/outputs/c.png", "/mnt/user-data/outputs/notes.md"]},
                )
            ]
        ),
        Reply(text="Here you are."),
    )
    xml, _ = wechat.message_xml("image", PicUrl="http://127.0.0.1:1/receipt.jpg", MediaId=picture)
    await wechat.deliver(xml)
    await wechat.wait(lambda: len(wechat.sent) == 3, timeout=30)
    assert "/mnt/user-data/uploads/receipt.jpg" in asked(fake_model)[0]
    assert wechat.sent[0]["text"]["content"] == "Here you are."
    image = wechat.sent[1]
    assert image["msgtype"] == "image"
    assert wechat.media[image["image"]["media_id"]] == ("image", "c.png", b"\x89PNG\r\n\x1a\n")
    assert "notes.md" in wechat.sent[2]["text"]["content"], "a file an account cannot send is named"


async def test_malformed_xml_is_dead_lettered_with_a_reason_and_the_next_is_answered(
    wechat: FakeWeChat, fake_model: FakeOpenAI, stack: AppConfig, bus: Bus
) -> None:
    broken = await wechat.deliver("<xml><ToUserName>oops</ToUser")
    unsigned_type, _ = wechat.message_xml("text")
    no_content = await wechat.deliver(unsigned_type, safe=True)
    assert (broken.status_code, no_content.status_code) == (200, 200), "taken: WeChat must not resend"
    await wechat.send_text("a good one")
    await wechat.wait(lambda: len(wechat.passive) == 1)
    reasons = [letter.reason for letter in await list_dead_letters(bus)]
    assert len(reasons) == 2
    assert any("not XML" in reason for reason in reasons)
    assert any(reason.endswith("a text message without Content") for reason in reasons)
    assert asked(fake_model) == ["a good one"]
