"""The embedded nats-server: start, readiness, data kept across restarts, one owner per data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from bus import Bus, DataDirLocked, EmbeddedServer, connect_and_provision
from tests.support.runs import run_events_place

pytestmark = pytest.mark.asyncio


async def test_a_second_server_on_the_same_data_dir_fails_with_a_clear_message(tmp_path: Path) -> None:
    async with EmbeddedServer(tmp_path) as first:
        with pytest.raises(DataDirLocked) as info:
            await EmbeddedServer(tmp_path).start()
        assert str(tmp_path) in str(info.value)
        assert "in use by another Antler" in str(info.value)
        assert first.url.startswith("nats://127.0.0.1:")
        # The first one is unharmed.
        bus = await Bus.connect(first.url)
        await bus.close()


async def test_jetstream_data_survives_a_restart_and_the_lock_is_released_on_stop(tmp_path: Path) -> None:
    async with EmbeddedServer(tmp_path) as server:
        bus = await connect_and_provision(server.url)
        subject, stream = await run_events_place(bus, "r")
        await bus.publish(subject, b'{"kept": true}')
        await bus.close()
        url_file = (tmp_path / "nats.url").read_text().strip()
        assert url_file == server.url, "clients of this data dir can find the server"
    assert not (tmp_path / "nats.url").exists()
    async with EmbeddedServer(tmp_path) as server:
        bus = await Bus.connect(server.url)
        info = await bus.js.stream_info(stream)
        assert info.state.messages == 1
        await bus.close()


async def test_a_configured_port_is_used(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with EmbeddedServer(tmp_path, port=port) as server:
        assert server.url == f"nats://127.0.0.1:{port}"


async def test_a_port_in_use_is_reported_with_the_servers_own_words(tmp_path: Path) -> None:
    async with EmbeddedServer(tmp_path / "a") as first:
        port = int(first.url.rsplit(":", 1)[1])
        from bus import ServerStartError

        with pytest.raises(ServerStartError) as info:
            await EmbeddedServer(tmp_path / "b", port=port).start(timeout=10)
        assert "address already in use" in str(info.value).lower()


async def test_a_killed_server_is_started_again_where_clients_reconnect_with_its_data(tmp_path: Path) -> None:
    import asyncio
    import os
    import signal

    async with EmbeddedServer(tmp_path) as server:
        supervisor = asyncio.create_task(server.supervise())
        bus = await connect_and_provision(server.url)
        subject, _ = await run_events_place(bus, "r")
        await bus.publish(subject, b'{"before": true}')
        url, first_pid = server.url, server.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        # The client reconnects by itself to the same address; the stored message is still there.
        # (A publish written just as the server died is lost with it: publish again, deduplicated.)
        for _ in range(20):
            try:
                ack = await bus.publish(subject, b'{"after": 1}', msg_id="a", timeout=1)
                break
            except Exception:
                continue
        assert ack.seq == 2
        assert (server.url, server.pid != first_pid) == (url, True)
        await bus.close()
    await asyncio.wait_for(supervisor, 5)  # returns once the server is stopped on purpose


async def test_a_server_that_keeps_dying_is_given_up_with_its_last_words(tmp_path: Path) -> None:
    import asyncio
    import os
    import signal

    from bus import ServerStartError

    async with EmbeddedServer(tmp_path) as server:
        supervisor = asyncio.create_task(server.supervise(max_restarts=1))
        for _ in range(2):
            pid = server.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            for _ in range(200):  # until it was started again (or given up)
                if server.pid != pid or supervisor.done():
                    break
                await asyncio.sleep(0.05)
        with pytest.raises(ServerStartError, match="keeps exiting"):
            await asyncio.wait_for(supervisor, 15)
