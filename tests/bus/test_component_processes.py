"""Components as real processes (`antler run`): drain on SIGTERM, crash and redelivery."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bus import Bus, Consumer, Delivery, decode
from bus.dlq import H_DELIVERIES, H_REASON
from bus.messages import InboundMessage, OutboundMessage
from config import BusConfig
from tests.conftest import finished, run_antler

pytestmark = pytest.mark.asyncio

SLOW_ECHO = "tests.components.slow_echo:run"


class Replies:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def cb(self, msg: Any) -> None:
        self.queue.put_nowait(decode(OutboundMessage, msg.data))

    async def next(self, timeout: float = 15.0) -> OutboundMessage:
        return await asyncio.wait_for(self.queue.get(), timeout)


@pytest_asyncio.fixture
async def replies(bus: Bus) -> AsyncIterator[Replies]:
    watch = Replies()
    sub = await bus.nc.subscribe(bus.subjects.chat_out("cli"), cb=watch.cb)
    yield watch
    await sub.unsubscribe()


def config_file(tmp_path: Path, bus_config: BusConfig, **bus_overrides: Any) -> str:
    """A config beside the stack's data dir: the echo (no component of ours, not in RIGHTS) logs in
    as the stack's admin saved there."""
    data = {
        "bus": {
            "prefix": bus_config.prefix,
            "ack_wait_seconds": 1.0,
            "data_dir": str(tmp_path / "data"),
            **bus_overrides,
        }
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


async def start_echo(nats_url: str, config: str) -> asyncio.subprocess.Process:
    return await run_antler("run", SLOW_ECHO, "--nats-url", nats_url, "-c", config)


async def test_sigterm_drains_in_flight_work_and_exits_zero(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path, replies: Replies
) -> None:
    proc = await start_echo(nats_url, config_file(tmp_path, bus_config))
    try:
        await bus.publish(
            bus.subjects.chat_in("cli", "c"), InboundMessage(channel="cli", chat_id="c", text="1.5")
        )
        assert (await replies.next()).text == "started"
        proc.send_signal(signal.SIGUSR1)  # what is it doing? (its tasks' stacks, on stderr)
        proc.send_signal(signal.SIGTERM)
        final = await replies.next()
        code, _, err = await finished(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert final.text == "done", "the in-flight message was finished, not abandoned"
    assert code == 0, err
    assert "stopped" in err
    dump = err[err.index("asyncio task(s) ---") : err.index("--- end of tasks ---")]
    assert 'slow_echo.py", line' in dump, "the dump shows the handler at work"
    assert "in handle" in dump
    info = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert info.state.messages == 0, "and it was acked before exit"


async def test_a_consumer_killed_before_acking_leaves_its_message_to_another_consumer_of_the_durable(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path, replies: Replies
) -> None:
    proc = await start_echo(nats_url, config_file(tmp_path, bus_config))
    try:
        await bus.publish(
            bus.subjects.chat_in("cli", "c"), InboundMessage(channel="cli", chat_id="c", text="60")
        )
        assert (await replies.next()).text == "started"
    finally:
        proc.kill()  # SIGKILL: no drain, no nak, nothing
        await proc.wait()

    picked_up = asyncio.Event()
    seen: list[tuple[str, int]] = []

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        seen.append((msg.text, delivery.num_delivered))
        picked_up.set()

    s = bus.subjects
    async with Consumer(
        bus,
        stream=s.chat_in_partition_stream(0),
        durable="slow-echo",
        filter_subjects=[s.chat_in_all],
        model=InboundMessage,
        handler=handle,
        ack_wait=1.0,
    ):
        await asyncio.wait_for(picked_up.wait(), 15)
    assert seen == [("60", 2)], "the same message, on its second delivery"


async def test_a_message_whose_handling_process_keeps_dying_ends_in_the_dlq(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path, replies: Replies
) -> None:
    config = config_file(tmp_path, bus_config, max_deliver=1)
    dlq: asyncio.Queue[Any] = asyncio.Queue()

    async def on_dlq(msg: Any) -> None:
        dlq.put_nowait(msg)

    sub = await bus.nc.subscribe(bus.subjects.dlq_all, cb=on_dlq)
    victim = await start_echo(nats_url, config)
    try:
        await bus.publish(
            bus.subjects.chat_in("cli", "c"), InboundMessage(channel="cli", chat_id="c", text="60")
        )
        assert (await replies.next()).text == "started"
        victim.kill()  # its only allowed delivery dies with it
        await victim.wait()
        rescuer = await start_echo(nats_url, config)
        try:
            letter = await asyncio.wait_for(dlq.get(), 20)
        finally:
            rescuer.send_signal(signal.SIGTERM)
            code, _, err = await finished(rescuer)
    finally:
        await sub.unsubscribe()
        if victim.returncode is None:
            victim.kill()
    assert code == 0, err
    assert replies.queue.empty(), "the rescuer did not run the poison message again"
    assert InboundMessage.model_validate_json(letter.data).text == "60"
    assert letter.headers[H_DELIVERIES] == "1"
    assert "without being settled" in letter.headers[H_REASON]
    info = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert info.state.messages == 0, "the exhausted message left the work queue"
