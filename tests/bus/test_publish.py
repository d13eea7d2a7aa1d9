"""Publishing with Nats-Msg-Id: duplicates inside the window are dropped."""

from __future__ import annotations

import pytest

from bus import Bus
from bus.messages import InboundMessage
from tests.support.consumers import Texts, inbound_consumer

pytestmark = pytest.mark.asyncio


async def test_duplicate_publishes_with_one_msg_id_are_delivered_once(bus: Bus) -> None:
    message = InboundMessage(channel="telegram", chat_id="42", message_id="1001", text="hello")
    acks = [
        await bus.publish(
            bus.subjects.chat_in("telegram", message.chat_id), message, msg_id=message.dedupe_id()
        )
        for _ in range(3)
    ]
    assert [a.duplicate for a in acks] == [None, True, True]

    other = InboundMessage(channel="telegram", chat_id="42", message_id="1002", text="second")
    await bus.publish(bus.subjects.chat_in("telegram", other.chat_id), other, msg_id=other.dedupe_id())

    stored = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert stored.state.messages == 2, "the duplicates were never stored"

    got = Texts()
    async with inbound_consumer(bus, got, "d"):
        assert await got.until(2) == ["hello", "second"]


async def test_the_same_platform_message_id_in_two_chats_is_not_a_duplicate(bus: Bus) -> None:
    a = InboundMessage(channel="slack", chat_id="C1", message_id="5", text="a")
    b = InboundMessage(channel="slack", chat_id="C2", message_id="5", text="b")
    first = await bus.publish(bus.subjects.chat_in("slack", a.chat_id), a, msg_id=a.dedupe_id())
    second = await bus.publish(bus.subjects.chat_in("slack", b.chat_id), b, msg_id=b.dedupe_id())
    assert not first.duplicate
    assert not second.duplicate
