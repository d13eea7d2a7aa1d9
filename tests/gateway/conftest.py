"""The whole back end for gateway tests: runner, sandbox broker and gateway on a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest_asyncio
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from config import AppConfig
from tests.support.gateway import running_gateway, stack_config  # noqa: F401  (the fixture)
from tests.support.memory import running_updater
from tests.support.runner import (  # noqa: F401  (fixtures)
    bash_needs_approval,
    running_runner,
    start_runner,
    start_stack,
)
from tests.support.sandbox import running_broker
from tests.support.schedules import running_scheduler


@pytest_asyncio.fixture
async def api_url(
    nats_url: str,
    stack_config: AppConfig,  # noqa: F811
) -> AsyncIterator[str]:
    async with (
        running_runner(nats_url, stack_config),
        running_broker(nats_url, stack_config),
        running_updater(nats_url, stack_config),
        running_scheduler(nats_url, stack_config),
        running_gateway(nats_url, stack_config) as base,
    ):
        yield base


def api_client(api_url: str, token: str) -> httpx.AsyncClient:
    """An HTTP client of the API under `/api`, signed in with `token`."""
    return httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": token}, timeout=30)


@pytest_asyncio.fixture
async def http(api_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """ana's HTTP client for the API under `/api`."""
    async with api_client(api_url, "tok-ana") as client:
        yield client


@pytest_asyncio.fixture
async def bob(api_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """bob's (not an admin) HTTP client for the API under `/api`."""
    async with api_client(api_url, "tok-bob") as client:
        yield client


@pytest_asyncio.fixture
async def client_for(api_url: str) -> AsyncIterator[Callable[[str], LangGraphClient]]:
    clients: list[LangGraphClient] = []

    def make(token: str) -> LangGraphClient:
        client = get_client(url=f"{api_url}/api", api_key=token)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.http.client.aclose()


@pytest_asyncio.fixture
async def ana(client_for: Callable[[str], LangGraphClient]) -> LangGraphClient:
    return client_for("tok-ana")
