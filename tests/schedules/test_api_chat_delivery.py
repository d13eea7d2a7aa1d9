"""A task made through DeerFlow's API that names a chat: it answers in its thread and in that chat,
and only a chat its owner talks to the bot from may be named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bus import Bus
from bus.runs import collect_run
from config import AppConfig
from tests.fakes.telegram_server import FakeTelegram
from tests.support.gateway import running_gateway
from tests.support.schedules import firings, running_scheduler, said

# The Telegram user 7 of the fake talks to the bot as `telegram:7`; a token of that user is theirs.
TOKENS = [
    {"token": "tok-tg7", "user_id": "telegram:7"},
    {"token": "tok-ana", "user_id": "ana"},
]
NEVER = {"title": "Nightly", "prompt": "say good night", "schedule_type": "cron", "timezone": "UTC"}
NEVER["schedule_spec"] = {"cron": "0 0 1 1 *"}  # once a year: the test fires it by hand


@pytest.fixture(autouse=True)
def gateway_tokens(config_data: dict[str, Any]) -> None:
    config_data["gateway"] = {"port": 0, "tokens": TOKENS}


@pytest_asyncio.fixture
async def api(nats_url: str, telegram_stack: AppConfig) -> AsyncIterator[str]:
    async with running_scheduler(nats_url, telegram_stack), running_gateway(nats_url, telegram_stack) as base:
        yield f"{base}/api"


def client(api: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=api, headers={"x-api-key": token}, timeout=30)


async def test_a_task_naming_the_owners_chat_answers_in_its_thread_and_in_that_chat(
    bus: Bus, api: str, telegram: FakeTelegram
) -> None:
    telegram.send_user_message("hello", chat_id=42, user_id=7)  # the chat becomes telegram:7's
    await telegram.wait(lambda: said(telegram, 42, "You said: hello"), timeout=60)
    async with client(api, "tok-tg7") as me:
        made = await me.post(
            "/scheduled-tasks", json={**NEVER, "chat": {"channel": "telegram", "chat_id": "42"}}
        )
        assert made.status_code == 200, made.text
        task = made.json()
        assert task["chat"] == {"channel": "telegram", "chat_id": "42", "topic_id": None}
        async with firings(bus, task["id"]) as lines:
            assert (await me.post(f"/scheduled-tasks/{task['id']}/trigger")).status_code == 200
            line = await lines.get()
        assert line.run_id is not None
        await collect_run(bus, line.run_id)
        await telegram.wait(lambda: said(telegram, 42, "You said: say good night"), timeout=60)
        state = (await me.get(f"/threads/{line.thread_id}/state")).json()
        answers = [m["content"] for m in state["values"]["messages"] if m["type"] == "ai"]
        assert answers == ["You said: say good night"]
        assert (await me.get(f"/scheduled-tasks/{task['id']}")).json()["chat"]["chat_id"] == "42"
    assert not said(telegram, 43, "say good night")


async def test_a_chat_that_is_not_the_callers_is_refused_with_a_403_and_nothing_is_kept(
    api: str, telegram: FakeTelegram
) -> None:
    telegram.send_user_message("hello", chat_id=42, user_id=7)
    telegram.send_user_message("hi", chat_id=44, user_id=8)  # telegram:8's chat
    await telegram.wait(lambda: said(telegram, 44, "You said: hi") and said(telegram, 42, "You said: hello"))
    async with client(api, "tok-tg7") as me, client(api, "tok-ana") as ana:
        for who, chat in [
            (me, {"channel": "telegram", "chat_id": "44"}),  # another user's chat
            (me, {"channel": "telegram", "chat_id": "43"}),  # a chat nobody wrote from
            (me, {"channel": "slack", "chat_id": "42"}),  # the same id on another platform
            (ana, {"channel": "telegram", "chat_id": "42"}),  # telegram:7's chat, asked by ana
        ]:
            refused = await who.post("/scheduled-tasks", json={**NEVER, "chat": chat})
            assert refused.status_code == 403, (chat, refused.text)
            assert "a chat you talk to the bot from" in refused.json()["detail"]
        assert (await me.get("/scheduled-tasks")).json() == []
        assert (await ana.get("/scheduled-tasks")).json() == []
        task = (await me.post("/scheduled-tasks", json=NEVER)).json()
        moved = await me.patch(
            f"/scheduled-tasks/{task['id']}", json={"chat": {"channel": "telegram", "chat_id": "44"}}
        )
        assert moved.status_code == 403, moved.text
        assert (await me.get(f"/scheduled-tasks/{task['id']}")).json()["chat"] is None
        moved = await me.patch(
            f"/scheduled-tasks/{task['id']}", json={"chat": {"channel": "telegram", "chat_id": "42"}}
        )
        assert moved.json()["chat"]["chat_id"] == "42"
