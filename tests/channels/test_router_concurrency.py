"""Many chats at once through the router: each chat in order, chats side by side, replies exactly once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from config import AppConfig
from tests.conftest import run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.chat import Chat, running_router
from tests.support.runner import StartStack, running_runner


async def test_a_chats_messages_are_answered_in_order_while_other_chats_go_on(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_stack: StartStack
) -> None:
    config_data["channels"] = {"multitask_strategy": "enqueue"}  # each message its own answer, in turn
    release = asyncio.Event()
    fake_model.script(
        Reply(text="first answer", when="alpha one", hold=release),
        Reply(text="second answer", when="alpha two"),
    )
    async with start_stack(running_runner, running_router), Chat(bus) as chat:
        await chat.say("alpha one", chat_id="alpha", message_id="a1")
        await fake_model.wait_for_requests(1)
        await chat.say("alpha two", chat_id="alpha", message_id="a2")
        for n in range(3):
            await chat.say(f"bravo {n}", chat_id=f"bravo-{n}", message_id=f"b{n}")
        # alpha's first answer is still held by the model: the other chats do not wait for it
        others = [await chat.final() for _ in range(3)]
        assert sorted(reply.reply_to or "" for reply in others) == ["b0", "b1", "b2"]
        assert {reply.text for reply in others} == {f"You said: bravo {n}" for n in range(3)}
        release.set()
        first, second = await chat.final(), await chat.final()
    assert (first.reply_to, first.text) == ("a1", "first answer")
    assert (second.reply_to, second.text) == ("a2", "second answer")


async def test_a_router_killed_mid_stream_delivers_every_reply_once_and_whole(
    bus: Bus,
    fake_model: FakeOpenAI,
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    config_file: Callable[[], Path],
) -> None:
    config_data["channels"] = {"stream_update_seconds": 0.05, "multitask_strategy": "enqueue"}
    config = app_config()
    path = config_file()
    words = " ".join(f"w{i}" for i in range(30))
    chats = 4
    fake_model.script(
        *(Reply(text=f"{words} for {n}", when=f"question {n}", chunk_delay=0.05) for n in range(chats))
    )
    async with running_runner(nats_url, config), Chat(bus) as chat:
        router = await run_antler("run", "router", "-c", str(path), "--nats-url", nats_url)
        try:
            for n in range(chats):
                await chat.say(f"question {n}", chat_id=f"kill-{n}", message_id=f"q{n}")
            first = await asyncio.wait_for(chat.replies.get(), 60)
            assert first.kind == "partial", "answers are streaming"
        finally:
            router.kill()  # SIGKILL: nothing drained, its un-acked run events go to the next router
            await router.wait()
        async with running_router(nats_url, config):
            finals: dict[str, str] = {}
            while len(finals) < chats:
                reply = await chat.final(timeout=60)
                assert reply.reply_to not in finals, f"a second final reply to {reply.reply_to}"
                finals[reply.reply_to or ""] = reply.text
            with contextlib.suppress(TimeoutError):  # a late duplicate would arrive in this window
                late = await chat.final(timeout=3)
                pytest.fail(f"a duplicate {late.kind} reply to {late.reply_to}")
    assert finals == {f"q{n}": f"{words} for {n}" for n in range(chats)}, "every reply whole, once"
