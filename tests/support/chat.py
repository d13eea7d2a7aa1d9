"""A chat router (alone, or with a runner: `router_stack`) and a channel as a script or adapter sees
it: publish user messages, collect replies."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from bus import Bus, decode
from bus.chat_partitions import publish_inbound
from bus.messages import (
    InboundMessage,
    OutboundMessage,
)
from channels.router import run as run_router
from config import AppConfig
from tests.conftest import running_component
from tests.support.runner import running_runner


def running_router(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    return running_component(nats_url, config, run_router, "router")


@pytest_asyncio.fixture
async def router_stack(nats_url: str, app_config: Callable[[], AppConfig]) -> AsyncIterator[AppConfig]:
    """A runner and a router on the test's config (as the test has set it by then)."""
    config = app_config()
    async with running_runner(nats_url, config), running_router(nats_url, config):
        yield config


class Chat:
    """A channel as an adapter sees it: publish user messages, collect the replies."""

    def __init__(self, bus: Bus, channel: str = "cli") -> None:
        self.bus = bus
        self.channel = channel
        self.replies: asyncio.Queue[OutboundMessage] = asyncio.Queue()
        self._sub: Any = None

    async def __aenter__(self) -> Chat:
        async def on_reply(msg: Any) -> None:
            self.replies.put_nowait(decode(OutboundMessage, msg.data))

        self._sub = await self.bus.nc.subscribe(self.bus.subjects.chat_out(self.channel), cb=on_reply)
        await self.bus.nc.flush()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._sub.unsubscribe()

    async def say(self, text: str, chat_id: str = "c1", **kw: Any) -> InboundMessage:
        message = InboundMessage(
            channel=self.channel, chat_id=chat_id, text=text, user_id=kw.pop("user_id", "u1"), **kw
        )
        await publish_inbound(self.bus, self.channel, message)
        return message

    async def final(self, timeout: float = 30) -> OutboundMessage:
        while True:
            reply = await asyncio.wait_for(self.replies.get(), timeout)
            if reply.kind != "partial":
                return reply


async def answer_in_chat(bus: Bus, text: str, **kw: Any) -> OutboundMessage:
    """Say `text` in a chat (`Chat.say`'s keywords) and wait for its final reply."""
    async with Chat(bus) as chat:
        await chat.say(text, **kw)
        return await chat.final()
