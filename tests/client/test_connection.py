"""The client's one reach into nats-py's internals: hearing the server's refusals as they come
(`listen_for_server_errors`). If a nats-py release moves the error callback, these fail."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from nats.aio.client import Client as NATS

from antler.client._connection import listen_for_server_errors
from bus import Bus
from config import BusConfig
from tests.support.nats_users import StackUsers


@pytest.mark.permission_violations("the test publishes where its user has no right, to hear the refusal")
async def test_a_refused_publish_is_heard_and_the_connections_own_callback_still_runs(
    nats_url: str, stack_users: StackUsers, bus_config: BusConfig
) -> None:
    sandbox = stack_users.user("sandbox")  # a component's user: it may not publish outside its rights
    config = bus_config.model_copy(update={"user": sandbox.user, "password": sandbox.password})
    bus = await Bus.connect(nats_url, config, name="test-refusals")
    heard: asyncio.Queue[str] = asyncio.Queue()
    before: list[str] = []
    original = bus.nc._error_cb

    async def still_there(exc: Exception) -> None:
        before.append(str(exc))
        await original(exc)

    bus.nc._error_cb = still_there  # stands for the callback the connection was opened with

    async def listener(exc: Exception) -> None:
        await heard.put(str(exc))

    try:
        listen_for_server_errors(bus.nc, listener)
        subject = f"nobody-may.{uuid.uuid4().hex}"
        await bus.nc.publish(subject, b"x")
        await bus.nc.flush()
        text = await asyncio.wait_for(heard.get(), 5)
    finally:
        await bus.close()

    assert "permissions violation" in text.lower()
    assert subject in text
    assert len(before) == 1  # the connection's own callback heard it too
    assert subject in before[0]


def test_a_nats_client_without_the_private_callback_is_refused_with_a_clear_error() -> None:
    nc = NATS()
    assert callable(nc._error_cb)  # where nats-py keeps it today; the client depends on this

    async def listener(exc: Exception) -> None:
        return None

    del nc._error_cb
    with pytest.raises(RuntimeError, match=r"Client\._error_cb"):
        listen_for_server_errors(nc, listener)
