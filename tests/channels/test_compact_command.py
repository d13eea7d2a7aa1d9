"""`/compact` in a chat: the conversation so far becomes a summary, and the chat goes on from it."""

from __future__ import annotations

import pytest

from bus import Bus
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.chat import Chat

pytestmark = pytest.mark.asyncio


SUMMARY_HEAD = "Here is a summary of the conversation to date"


async def test_compact_in_a_chat_summarises_it_and_the_next_answer_builds_on_the_summary(
    bus: Bus,
    fake_model: FakeOpenAI,
    router_stack: AppConfig,
) -> None:
    async with Chat(bus) as chat:
        await chat.say("/compact")
        assert "Nothing to compact" in (await chat.final()).text

        fake_model.script(
            Reply(text="Noted: blue.", when="favourite colour"),
            Reply(text="Noted: Lisbon.", when="home town"),
        )
        await chat.say("My favourite colour is blue")
        await chat.final()
        await chat.say("My home town is Lisbon")
        await chat.final()

        fake_model.script(Reply(text="- Favourite colour: blue.", when="Context Extraction Assistant"))
        await chat.say("/compact")
        done = await chat.final()
        assert done.kind == "command"
        assert done.text.startswith("Compacted: 2 earlier message(s) are now a summary"), done.text

        fake_model.script(Reply(text="Blue, and Lisbon.", when="what do you know"))
        await chat.say("what do you know about me?")
        assert (await chat.final()).text == "Blue, and Lisbon."
    sent = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] != "system"]
    assert sent[0].startswith(SUMMARY_HEAD)
    assert "Favourite colour: blue" in sent[0]
    assert "My favourite colour is blue" not in sent
