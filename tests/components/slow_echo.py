"""A test component: echoes chat messages after sleeping for the number of seconds in the text.

It announces each message as it starts (a `partial` reply) and finishes with a
`final` reply that says which delivery it was, so tests can see in-flight work,
redelivery and drain from the outside, the way an operator would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bus import Bus, Consumer, Delivery, run_consumers
from bus.chat_partitions import chat_partitions
from bus.messages import InboundMessage, OutboundMessage


async def run(bus: Bus, config: Any) -> None:
    s = bus.subjects

    async def handle(message: InboundMessage, delivery: Delivery) -> None:
        out = s.chat_out(message.channel)
        meta = {"delivered": delivery.num_delivered, "message_id": message.message_id}
        started = OutboundMessage(
            channel=message.channel, chat_id=message.chat_id, kind="partial", text="started"
        )
        started.metadata = meta
        await bus.publish(out, started)
        await asyncio.sleep(float(message.text))
        done = OutboundMessage(channel=message.channel, chat_id=message.chat_id, kind="final", text="done")
        done.metadata = meta
        await bus.publish(out, done)

    # Every partition's inbound stream (partition 0's also holds what came without a partition).
    await run_consumers(
        *(
            Consumer(
                bus,
                stream=s.chat_in_partition_stream(k),
                durable="slow-echo",
                filter_subjects=[s.chat_in_all],
                model=InboundMessage,
                handler=handle,
                concurrency=4,
            )
            for k in range(await chat_partitions(bus))
        )
    )
