"""The chat router component: its share of the chat partitions, each with its consumers.

Three durable consumers:

- inbound (`<prefix>.chat.in.*.*.<partition>`, per partition this router owns: each chat's
  messages in order, chats side by side): `inbound.Router` (policy, chat -> thread, commands
  answered here, everything else a run with the chat as origin);
- unbind (`<prefix>.events.thread.deleted`): the router owns chat bindings; a chat whose thread
  was deleted starts a fresh one (`bindings`);
- projection (`<prefix>.runs.ev.*.chat.*.<partition>`, per partition owned): chat runs' events
  back as chat replies (`projection`).

Inbound messages and chat runs' events are stored by chat partition; any number of router
processes share the partitions, one owner each, through leases in the bus (`partitions`), so each
chat's messages become runs in the order sent and its replies go out in order.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nats.js.api import DeliverPolicy

from bus import Bus, Consumer, run_consumers
from bus.chat_partitions import chat_partitions, streams_count
from bus.messages import InboundMessage, ThreadDeleted
from bus.service import start_service
from channels.router.bindings import chat_key
from channels.router.inbound import Router
from channels.router.partitions import (
    DIRECT_DURABLE,
    UNPARTITIONED_DURABLE,
    EventsStart,
    Partitions,
    inbound_durable,
    unsplit_chat_in,
)
from channels.router.projection import ReplyProjection, projection_consumer
from config import AppConfig


def _chat_of(message: InboundMessage) -> str:
    return chat_key(message.channel, message.chat_id, message.topic_id)


async def run(bus: Bus, config: AppConfig) -> None:
    """The router component: its share of the chat partitions until cancelled, then drain."""
    router = await Router.open(bus, config)
    s = bus.subjects
    projection = ReplyProjection(bus, config, router.runs, router.origins, router.finals)

    def inbound_consumer(stream: str, durable: str, filter_subject: str) -> Consumer[Any]:
        return Consumer(
            bus,
            stream=stream,
            durable=durable,
            filter_subjects=[filter_subject],
            model=InboundMessage,
            handler=router.on_inbound,
            # A chat's messages become runs in the order sent; different chats go on at once.
            key=_chat_of,
            concurrency=16,
        )

    async def partition_consumers(partition: int, events_start: EventsStart) -> list[Consumer[Any]]:
        router.events_start[partition] = events_start
        stream = s.chat_in_partition_stream(partition)
        consumers: list[Consumer[Any]] = [
            inbound_consumer(stream, inbound_durable(partition), s.chat_in_partition(partition)),
            # Its RUN_EVENTS_<k>, and the single RUN_EVENTS of before the split while it is there.
            *(
                projection_consumer(bus, projection, partition, events, start)
                for events, start in events_start.items()
            ),
        ]
        if partition == 0:  # and those published without their chat's route (scripts) or partition
            consumers.append(inbound_consumer(stream, DIRECT_DURABLE, s.chat_in_direct))
            consumers.append(inbound_consumer(stream, UNPARTITIONED_DURABLE, s.chat_in_published))
        if await unsplit_chat_in(bus):
            # The single CHAT_IN of before the split: drained by the durables it had, until removed.
            old = s.unsplit_chat_in_stream
            consumers.append(
                inbound_consumer(old, inbound_durable(partition), s.chat_in_partition(partition))
            )
            if partition == 0:
                consumers.append(inbound_consumer(old, DIRECT_DURABLE, s.chat_in_direct))
        return consumers

    # The streams' count, not this process's setting: every partition that stores messages is served
    # (and a count changed by provisioning is followed at the next look).
    count = await chat_partitions(bus)
    partitions = Partitions(
        bus, count, config.bus.lease_seconds, partition_consumers, recount=lambda: streams_count(bus)
    )
    unbind = Consumer(
        bus,
        stream=s.events_stream,
        durable="router-thread-deleted",
        filter_subjects=[s.event("thread.deleted")],
        model=ThreadDeleted,
        handler=router.bindings.on_thread_deleted,
        deliver_policy=DeliverPolicy.NEW,
    )
    # No requests to answer; a service so that `$SRV` discovery (and /health) counts routers.
    presence = await start_service(bus, "router", [], description="Chat router (chats -> runs -> replies)")
    sharing = asyncio.create_task(partitions.run(), name="router-partitions")
    try:
        await run_consumers(unbind)
    finally:
        partitions.stop()
        await asyncio.gather(sharing, return_exceptions=True)
        await presence.stop()
