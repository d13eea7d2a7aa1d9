"""Dead letters can be listed, read and replayed onto their original subject."""

from __future__ import annotations

import asyncio

import pytest

from bus import Bus, Delivery, get_dead_letter, list_dead_letters, replay
from bus.messages import InboundMessage
from tests.support.consumers import inbound_consumer

pytestmark = pytest.mark.asyncio


async def test_a_replayed_dead_letter_is_handled_again_and_leaves_the_dlq(bus: Bus) -> None:
    s = bus.subjects
    healthy = asyncio.Event()
    failing = True
    handled: list[str] = []

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        if failing:
            raise RuntimeError("downstream is down")
        handled.append(msg.text)
        healthy.set()

    consumer = inbound_consumer(bus, handle, "r", max_deliver=1)
    dead: asyncio.Queue[object] = asyncio.Queue()

    async def on_dlq(msg: object) -> None:
        dead.put_nowait(msg)

    await bus.nc.subscribe(s.dlq_all, cb=on_dlq)
    async with consumer:
        message = InboundMessage(channel="cli", chat_id="c", text="important", message_id="m1")
        await bus.publish(s.chat_in("cli", message.chat_id), message, msg_id=message.dedupe_id())
        await asyncio.wait_for(dead.get(), 10)
        letters = await list_dead_letters(bus)
        assert len(letters) == 1
        letter = letters[0]
        assert letter.original_subject.startswith(s.chat_in("cli", "c"))
        assert letter.original_msg_id == "cli:c:m1"
        assert "downstream is down" in letter.reason

        failing = False  # the outage is over
        await replay(bus, letter)
        await asyncio.wait_for(healthy.wait(), 10)
    assert handled == ["important"]
    assert await get_dead_letter(bus, letter.seq) is None
    assert await list_dead_letters(bus) == []
