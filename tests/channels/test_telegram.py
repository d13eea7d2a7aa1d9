"""Telegram end to end: the real python-telegram-bot against a fake Bot API, through router and runner."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket

import httpx
import pytest

from bus import Bus, list_dead_letters
from bus.chat_partitions import chat_partitions
from channels.telegram import render_html, split_message
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.conftest import running_component
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.fakes.telegram_server import FakeTelegram
from tests.support.adapters import StartAdapter
from tests.support.eventually import eventually


async def test_a_streamed_answer_is_sent_then_edited_into_the_final_text(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="The **capital** of France is `Paris`.", chunk_delay=0.1))
    telegram.send_user_message("What is the capital of France?")
    await telegram.wait_for("editMessageText", count=2)
    sent = [p for m, p in telegram.calls if m == "sendMessage"]
    assert len(sent) == 1, "one message, edited in place"
    assert sent[0]["chat_id"] == 42
    final = "The <b>capital</b> of France is <code>Paris</code>."
    for _ in range(50):
        edits = [p for m, p in telegram.calls if m == "editMessageText"]
        if edits[-1]["text"] == final:
            break
        await asyncio.sleep(0.1)
    assert edits[-1]["text"] == final
    assert edits[-1]["parse_mode"] == "HTML"
    assert {int(e["message_id"]) for e in edits} == {sent[0]["sent_message_id"]}, "edits the message it sent"


async def test_a_message_the_chat_streams_refuse_for_a_while_is_stored_once_they_take_it(
    bus: Bus,
    telegram: FakeTelegram,
    fake_model: FakeOpenAI,
    telegram_stack: AppConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stream's leader being elected, a node restarting: the adapter keeps trying to store the
    update, and leaves it unconfirmed with Telegram (which never sends a confirmed one again) until
    it is stored."""
    fake_model.script(Reply(text="Stored after all."))
    streams = [bus.subjects.chat_in_partition_stream(k) for k in range(await chat_partitions(bus))]
    configs = [(await bus.js.stream_info(name)).config for name in streams]
    taken = [list(config.subjects or []) for config in configs]
    for config in configs:  # nothing stores chat messages now
        config.subjects = [f"{bus.config.prefix}.parked.{config.name}"]
        await bus.js.update_stream(config)
    with caplog.at_level(logging.WARNING, logger="channels.delivery.inbound"):
        telegram.send_user_message("are you keeping this?")
        await eventually(lambda: "trying again" in caplog.text, "a store refused and tried again")
    assert [u["message"]["text"] for u in telegram.updates] == ["are you keeping this?"], "not confirmed"
    for config, subjects in zip(configs, taken, strict=True):
        config.subjects = subjects
        await bus.js.update_stream(config)
    [sent] = await telegram.wait_for("sendMessage")
    assert sent["text"] == "Stored after all."
    assert fake_model.agent_requests[0]["messages"][-1]["content"] == "are you keeping this?"
    await eventually(lambda: not telegram.updates, "the update confirmed once stored")


async def test_polling_resumes_after_the_network_comes_back(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    telegram.outage = True
    failed = telegram.polls
    for _ in range(200):
        if telegram.polls >= failed + 2:
            break
        await asyncio.sleep(0.05)
    telegram.send_user_message("are you back?")
    telegram.outage = False
    sent = await telegram.wait_for("sendMessage")
    assert sent[0]["chat_id"] == 42
    assert fake_model.agent_requests[0]["messages"][-1]["content"] == "are you back?"


async def test_a_presented_file_is_sent_as_a_document(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "/mnt/user-data/outputs/notes.md", "content": "# Notes\n"})
            ]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/notes.md"]})]),
        Reply(text="Here are your notes."),
    )
    telegram.send_user_message("write me notes")
    documents = await telegram.wait_for("sendDocument")
    assert documents[0]["document"] == b"# Notes\n"
    assert documents[0]["document_name"] == "notes.md"
    texts = [p["text"] for m, p in telegram.calls if m in ("sendMessage", "editMessageText")]
    assert texts[-1] == "Here are your notes."
    methods = [m for m, _ in telegram.calls if m in ("sendMessage", "editMessageText", "sendDocument")]
    assert methods[-1] == "sendDocument", "the file follows the final text"


async def test_a_presented_picture_is_sent_as_a_photo(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[ToolCall("bash", {"command": "printf 'PNGDATA' > /mnt/user-data/outputs/chart.png"})]
        ),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/chart.png"]})]),
        Reply(text="Your chart."),
    )
    telegram.send_user_message("draw it")
    photos = await telegram.wait_for("sendPhoto")
    assert photos[0]["photo"] == b"PNGDATA"
    assert photos[0]["photo_name"] == "chart.png"
    assert not [m for m, _ in telegram.calls if m == "sendDocument"]


async def test_webhook_mode_registers_the_url_and_takes_only_signed_updates(
    telegram: FakeTelegram, fake_model: FakeOpenAI, bus: Bus, start_adapter: StartAdapter
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = {
        "bot_token": telegram.token,
        "base_url": telegram.base_url,
        "webhook_url": "https://bot.example.org/telegram/hook",
        "webhook_port": port,
        "webhook_secret": "s3cret",
    }
    async with start_adapter("telegram", settings, run_telegram):
        registered = await telegram.wait_for("setWebhook")
        assert registered[0]["url"] == "https://bot.example.org/telegram/hook"
        assert registered[0]["secret_token"] == "s3cret"
        update = telegram.make_update("hi via webhook")
        async with httpx.AsyncClient() as http:
            hook = f"http://127.0.0.1:{port}/telegram/hook"
            for _ in range(100):  # the webhook server comes up right after setWebhook
                try:
                    forged = await http.post(
                        hook, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "x"}
                    )
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert forged.status_code == 403
            signed_header = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
            unreadable = telegram.make_update("odd", entities=[{"type": "future_entity"}])
            refused = await http.post(hook, json=unreadable, headers=signed_header)
            assert refused.status_code == 200, "taken, or Telegram would send it again and again"
            signed = await http.post(hook, json=update, headers=signed_header)
            assert signed.status_code == 200
        await telegram.wait_for("sendMessage")
        asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
        assert asked == ["hi via webhook"], "only the signed, readable update ran"
        assert telegram.polls == 0, "no long polling in webhook mode"
        letters = await list_dead_letters(bus)
        assert [json.loads(letter.data) for letter in letters] == [unreadable]


async def test_a_retried_message_gets_one_answer_and_groups_need_a_mention(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    update = telegram.send_user_message("hello")
    telegram.resend(update)
    await telegram.wait_for("sendMessage")
    telegram.send_user_message("chatter among humans", chat_id=-100, chat_type="supergroup")
    mention = [{"type": "mention", "offset": 0, "length": len("@antler_bot")}]
    telegram.send_user_message("@antler_bot help me", chat_id=-100, chat_type="supergroup", entities=mention)
    await telegram.wait_for("sendMessage", count=2)
    # Messages are handled in order: once this one is answered, no stray answer to the others can follow.
    telegram.send_user_message("last one")
    await telegram.wait_for("sendMessage", count=3)
    answered = [p["chat_id"] for m, p in telegram.calls if m == "sendMessage"]
    assert answered == [42, -100, 42]
    asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    assert asked == ["hello", "help me", "last one"], (
        "the retry and the chatter ran nothing; @antler_bot is not part of the question"
    )


async def test_a_document_sent_to_the_bot_reaches_the_agent_as_an_upload(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads/minutes.txt"})]),
        Reply(text="The meeting decided to ship."),
    )
    telegram.send_user_document("minutes.txt", b"Decision: ship on Friday.", caption="what was decided?")
    await telegram.wait_for("sendMessage")
    first = fake_model.agent_requests[0]["messages"][-1]["content"]
    assert first.startswith("what was decided?")
    assert "/mnt/user-data/uploads/minutes.txt" in first
    tool_result = fake_model.agent_requests[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert unfenced(tool_result["content"]) == "Decision: ship on Friday."


async def test_a_document_whose_download_fails_a_moment_is_fetched_again_not_dead_lettered(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig, bus: Bus
) -> None:
    # Telegram's file server answering 502 once is the network, not an unreadable update: the update
    # stays with Telegram and is handled when fetched again (a tour run dead-lettered one on a reset).
    fake_model.script(Reply(text="Read it.", when="read this"))
    telegram.failing_downloads = 1
    telegram.send_user_document("notes.txt", b"Bring the maps.", caption="read this")
    await telegram.wait_for("sendMessage")
    assert telegram.downloads == 2, "downloaded again after the failed try"
    assert "/mnt/user-data/uploads/notes.txt" in fake_model.agent_requests[0]["messages"][-1]["content"]
    assert await list_dead_letters(bus) == []


def test_markdown_is_rendered_safely_and_urls_stay_intact() -> None:
    assert render_html("a < b & **c**") == "a &lt; b &amp; <b>c</b>"
    assert render_html("```python\nx = '<tag>'\n```") == "<pre>x = '&lt;tag&gt;'</pre>"
    assert (
        render_html("[the *docs*](https://x.io/a*b*c) or https://y.io/*p*/q, *yes*")
        == '<a href="https://x.io/a*b*c">the <i>docs</i></a> or https://y.io/*p*/q, <i>yes</i>'
    ), "no tags inside a link's address or a bare URL"


def test_a_code_block_longer_than_a_message_is_closed_and_reopened() -> None:
    text = "intro\n\n```python\n" + "x = 1  # 🦊\n" * 900 + "```\n\nend"
    pieces = split_message(text)
    assert len(pieces) >= 3
    assert all(len(p.encode("utf-16-le")) // 2 <= 4096 for p in pieces), "Telegram counts UTF-16 units"
    assert all(render_html(p).count("<pre>") == render_html(p).count("</pre>") == 1 for p in pieces[1:-1])
    assert pieces[1].startswith("```python\n"), "the next piece opens the block again"


async def test_an_adapter_restarted_mid_answer_finishes_the_message_it_started(
    telegram: FakeTelegram, fake_model: FakeOpenAI, nats_url: str, start_adapter: StartAdapter
) -> None:
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    fake_model.script(Reply(text="one two three four five six seven", chunk_delay=0.25))
    async with start_adapter("telegram", settings, None) as config:
        async with running_component(nats_url, config, run_telegram, "telegram"):
            await telegram.wait_for("getMe")
            telegram.send_user_message("tell me slowly")
            await telegram.wait_for("sendMessage")
        # the adapter is gone while the answer streams on
        async with running_component(nats_url, config, run_telegram, "telegram"):
            for _ in range(200):
                edits = [p for m, p in telegram.calls if m == "editMessageText"]
                if edits and edits[-1]["text"] == "one two three four five six seven":
                    break
                await asyncio.sleep(0.05)
    sent = [p for m, p in telegram.calls if m == "sendMessage"]
    assert len(sent) == 1, "the restarted adapter edits the message instead of sending a new one"
    assert edits[-1]["text"] == "one two three four five six seven"
    assert {int(e["message_id"]) for e in edits} == {sent[0]["sent_message_id"]}


async def test_a_rate_limited_answer_waits_as_told_and_arrives(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig, bus: Bus
) -> None:
    fake_model.script(Reply(text="Paris."))
    telegram.rate_limit("sendMessage", times=6)  # more 429s than a reply is delivered times
    telegram.send_user_message("capital of France?")
    await telegram.wait_for("sendMessage", timeout=30)
    assert [m for m, _ in telegram.calls].count("sendMessage:429") == 6
    assert [p["text"] for m, p in telegram.calls if m in ("sendMessage", "editMessageText")] == ["Paris."]
    assert await list_dead_letters(bus) == [], "a rate limit is no reason to give an answer up"


async def test_a_sticker_gets_a_helpful_answer_and_runs_nothing(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    sticker = {"file_id": "s1", "file_unique_id": "us1", "type": "regular", "width": 512, "height": 512}
    update = telegram.make_update("", sticker={**sticker, "is_animated": False, "is_video": False})
    del update["message"]["text"]
    telegram.push(update)
    told = await telegram.wait_for("sendMessage")
    assert "can't read a sticker" in told[0]["text"]
    telegram.send_user_message("and now in words")
    await telegram.wait_for("sendMessage", count=2)
    asked = [unfenced(r["messages"][-1]["content"]) for r in fake_model.agent_requests]
    assert asked == ["and now in words"], "the sticker was not sent to the agent as an empty prompt"


async def test_an_anonymous_group_admin_who_mentions_the_bot_is_answered(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Here is the summary."))
    anonymous = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
    text = "@antler_bot summarize the week"
    telegram.send_user_message(
        text,
        chat_id=-100,
        chat_type="supergroup",
        entities=[{"type": "mention", "offset": 0, "length": len("@antler_bot")}],
        sender=anonymous,
        sender_chat={"id": -100, "type": "supergroup", "title": "Group"},
    )
    sent = await telegram.wait_for("sendMessage")
    assert sent[0]["chat_id"] == -100
    assert unfenced(fake_model.agent_requests[0]["messages"][-1]["content"]) == "summarize the week"


async def test_an_edited_message_is_answered_with_how_to_send_the_change(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Paris."))
    original = telegram.send_user_message("capital of Frnace?")
    await telegram.wait_for("sendMessage")
    edited = telegram.make_update("capital of France?", edited=True)
    edited["edited_message"]["message_id"] = original["message"]["message_id"]
    telegram.resend(edited)
    told = await telegram.wait_for("sendMessage", count=2)
    assert "only follow new messages" in told[1]["text"]
    replied_to = told[1].get("reply_parameters", {}).get("message_id") or told[1].get("reply_to_message_id")
    assert replied_to == original["message"]["message_id"], "the answer is to the edited message"
    assert len(fake_model.agent_requests) == 1, "the edit started no second run"


async def test_an_update_the_library_cannot_read_is_dead_lettered_once_and_polling_goes_on(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig, bus: Bus
) -> None:
    fake_model.script(Reply(text="Still here."))
    # An entity of a shape python-telegram-bot does not know (no offset, no length).
    unreadable = telegram.make_update("hello", entities=[{"type": "future_entity"}])
    telegram.push(unreadable)
    telegram.send_user_message("are you still there?")
    sent = await telegram.wait_for("sendMessage")
    assert sent[0]["text"] == "Still here."
    assert telegram.deliveries[unreadable["update_id"]] == 1, "confirmed to Telegram, never fetched again"
    letters = await list_dead_letters(bus)
    assert len(letters) == 1
    assert json.loads(letters[0].data) == unreadable, "the raw update is kept"
    assert "MessageEntity" in letters[0].reason


async def test_commands_are_offered_with_names_telegram_accepts_and_help_lists_them_so(
    telegram: FakeTelegram, fake_model: FakeOpenAI, telegram_stack: AppConfig
) -> None:
    fake_model.script(Reply(text="Let us look at the data."))
    await telegram.wait(
        lambda: any(
            "data_analysis" in [c["command"] for c in p["commands"]]
            for m, p in telegram.calls
            if m == "setMyCommands"
        )
    )
    menu = [p["commands"] for m, p in telegram.calls if m == "setMyCommands"][-1]
    names = [c["command"] for c in menu]
    assert {"new", "status", "help", "data_analysis"} <= set(names)
    assert all(re.fullmatch(r"[a-z0-9_]{1,32}", name) for name in names), names
    assert all(c["description"] for c in menu)
    telegram.send_user_message("/help")
    helped = await telegram.wait_for("sendMessage")
    assert "/data_analysis - " in helped[0]["text"], "listed as it is tapped"
    assert "/data-analysis" not in helped[0]["text"]
    telegram.send_user_message("/data_analysis what is in sales.csv?")  # as tapping sends it
    await telegram.wait_for("sendMessage", count=2)
    assert len(fake_model.agent_requests) == 1, "the tapped name starts the skill's run"
    system = fake_model.agent_requests[0]["messages"][0]["content"]
    assert '<active_skill name="data-analysis">' in system
