"""The gateway as a component: it says it is ready only once it answers HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bus import Bus
from bus.messages import ComponentHealth
from bus.runtime import serve
from config import AppConfig
from gateway.server import run as run_gateway
from tests.conftest import component_login

pytestmark = pytest.mark.asyncio


async def test_the_gateway_says_it_is_ready_once_it_answers_http(
    nats_url: str, stack_config: AppConfig, bus: Bus
) -> None:
    # `antler run gateway` prints "gateway: ready" on this report, and an orchestrator's rolling
    # restart waits for it before stopping the next copy: without it that wait never ends.
    own = await component_login(stack_config, "gateway").connect(nats_url, "test-gateway")
    healthy = asyncio.Event()

    def on_health(name: str, health: ComponentHealth) -> None:
        if name == "gateway" and health.status == "healthy":
            healthy.set()

    stop = asyncio.Event()
    serving = asyncio.create_task(
        serve(own, stack_config, {"gateway": run_gateway}, stop, on_health=on_health)
    )
    try:
        await asyncio.wait_for(healthy.wait(), 30)
        url = (await asyncio.to_thread(Path(stack_config.bus.data_dir, "gateway.url").read_text)).strip()
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{url}/health")).status_code == 200
    finally:
        stop.set()
        await serving
        await own.close()
