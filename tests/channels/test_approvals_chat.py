"""Approvals and steering from a chat: the request shown with `/approve` and `/deny`, answered where
people are; a message sent while the answer is written joins it."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from channels.telegram import run as run_telegram
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, echo_and_answer, two_calls_then_answer
from tests.fakes.telegram_server import FakeTelegram
from tests.support.adapters import StartAdapter

pytestmark = pytest.mark.usefixtures("bash_needs_approval")


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


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


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


async def test_a_message_sent_while_the_answer_is_written_steers_it(
    telegram: FakeTelegram, fake_model: FakeOpenAI, start_adapter: StartAdapter
) -> None:
    gate = asyncio.Event()
    fake_model.script(
        Reply(text="A haiku, in English.", hold=gate, when="write a haiku"),
        Reply(text="Un haïku, en français.", when="in French please"),
    )
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    steer = {"multitask_strategy": "steer"}
    async with start_adapter("telegram", settings, run_telegram, steer):
        telegram.send_user_message("write a haiku")
        await fake_model.wait_until(lambda: fake_model.holding == 1)
        telegram.send_user_message("in French please")
        await sent_text(telegram, "Got it: I am taking that into the answer")
        gate.set()
        await sent_text(telegram, "Un haïku, en français.")
    # One run: its next model call had the message sent meanwhile, after its first answer.
    [_, second] = fake_model.agent_requests
    assert second["messages"][-1] == {"role": "user", "content": "in French please"}
    assert second["messages"][-2]["content"] == "A haiku, in English."


async def test_a_bash_call_is_approved_with_telegrams_button(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(*echo_and_answer("pressed-approve", "Ran it: pressed-approve."))
    telegram.send_user_message("run it when I say so")
    await sent_text(telegram, r"/approve ap[0-9a-f]+")
    [keyboard] = [_json(p["reply_markup"]) for m, p in telegram.calls if m in SENDS and p.get("reply_markup")]
    approve, deny = keyboard["inline_keyboard"][0]
    assert approve["text"] == "Approve bash"
    assert deny["callback_data"].startswith("/deny ap")

    telegram.press_button(approve["callback_data"])
    [acknowledged] = await telegram.wait_for("answerCallbackQuery")
    assert acknowledged["text"] == f"Sent: {approve['callback_data']}"
    await sent_text(telegram, "Ran it: pressed-approve.")
    tool_result = fake_model.agent_requests[-1]["messages"][-1]
    assert "pressed-approve" in tool_result["content"]


async def test_a_message_sent_while_an_approval_waits_joins_the_answer_once_it_is_approved(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    """Chats steer by default: the message waits with the request instead of throwing it away."""
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo the-backup-ran"})], when="back it up"),
        Reply(text="Backed up, and yes: it is in /backups.", when="where does it go?"),
    )
    telegram.send_user_message("back it up when I say so")
    await sent_text(telegram, r"/approve ap[0-9a-f]+")
    [keyboard] = [_json(p["reply_markup"]) for m, p in telegram.calls if m in SENDS and p.get("reply_markup")]
    approve, _ = keyboard["inline_keyboard"][0]

    telegram.send_user_message("where does it go?")
    await sent_text(telegram, "Got it: I will take that in once the request above is answered.")
    telegram.press_button(approve["callback_data"])
    await sent_text(telegram, "Backed up, and yes: it is in /backups.")
    # The approved call ran, and the model's next call read its result, then the message.
    said = fake_model.agent_requests[-1]["messages"]
    assert "the-backup-ran" in said[-2]["content"]
    assert said[-1] == {"role": "user", "content": "where does it go?"}
    assert len(fake_model.agent_requests) == 2, "the message made no run of its own"


async def test_two_calls_made_side_by_side_are_answered_one_at_a_time_from_the_chat(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    # LangGraph takes an answer to one of several waiting interrupts only addressed to it: the chat's
    # `/approve <id>` names the request, and the runner addresses it to the interrupt asking it.
    fake_model.script(*two_calls_then_answer("both", "One ran, one was refused.", after="one is enough"))
    telegram.send_user_message("both, please")
    await sent_text(telegram, "bash: echo right-call")
    texts = "\n".join(str(p.get("text")) for m, p in telegram.calls if m in SENDS)
    asked = dict(re.findall(r"bash: echo (\w+-call)\s+/approve (ap[0-9a-f]+)", texts))
    assert set(asked) == {"left-call", "right-call"}, [p.get("text") for m, p in telegram.calls if m in SENDS]

    telegram.send_user_message(f"/approve {asked['left-call']}")
    telegram.send_user_message(f"/deny {asked['right-call']} one is enough")
    await sent_text(telegram, "One ran, one was refused.")
    results = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 2
    assert "left-call" in results[0]
    assert "the user denied this call: one is enough" in results[1]
