"""What the embedded nats-server acknowledged is on disk: a power cut loses none of it.

The store sits on `tests.support.lazyfs`, which forgets every write not fsynced when the power
is "cut" (the server killed, then unsynced data dropped, as a real power loss drops the page
cache). With `sync_interval: always` (our default) every acknowledged message is back after the
restart; with nats-server's own default (`2m`) they are gone — which is what shows the layer
really drops what it should, so the first case proves something.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bus import Bus, EmbeddedServer, connect_and_provision
from tests.support import lazyfs
from tests.support.runs import run_events_place

pytestmark = pytest.mark.asyncio

MESSAGES = 50


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    reason = lazyfs.unavailable()
    if reason:
        pytest.skip(f"no power-loss layer on this machine: {reason}")
    return tmp_path


async def acknowledged_then_power_cut(tmp_path: Path, sync_interval: str) -> tuple[int, lazyfs.CutReport]:
    """Publish MESSAGES (each acknowledged), cut the power, start again: how many are stored."""
    data = tmp_path / "data"
    async with lazyfs.LazyFS(tmp_path / "disk", data / "jetstream") as layer:
        server = EmbeddedServer(data, sync_interval=sync_interval)
        await server.start()
        bus = await connect_and_provision(server.url)
        await layer.writeback()  # the streams were made long ago: only the messages are new
        subject, stream = await run_events_place(bus, "r")
        for n in range(MESSAGES):
            ack = await bus.publish(subject, b'{"n": %d}' % n)
            assert ack.seq == n + 1
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        await server.stop()  # reaps it: nothing writes to the store any more
        await bus.nc.close()
        cut = await layer.cut()
        async with EmbeddedServer(data, sync_interval=sync_interval) as again:
            bus = await Bus.connect(again.url)
            try:
                info = await bus.js.stream_info(stream)
            finally:
                await bus.nc.close()
    return info.state.messages, cut


async def test_every_acknowledged_message_survives_a_power_cut(disk: Path) -> None:
    stored, cut = await acknowledged_then_power_cut(disk, "always")
    assert stored == MESSAGES, f"{MESSAGES - stored} acknowledged messages lost ({cut})"


async def test_with_nats_servers_own_default_a_power_cut_loses_acknowledged_messages(disk: Path) -> None:
    """The reason for `always`, and the proof that the layer drops what was never synced."""
    stored, cut = await acknowledged_then_power_cut(disk, "2m")
    assert cut.bytes_dropped > 0
    assert stored < MESSAGES, f"all {MESSAGES} kept though {cut.bytes_dropped} unsynced bytes were dropped"
