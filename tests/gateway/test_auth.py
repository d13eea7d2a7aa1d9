"""With tokens configured, every route but health and the docs refuses a caller without a known token."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from fastapi import FastAPI

from bus import Bus
from config import AppConfig, GatewayConfig
from gateway.app import create_app
from gateway.auth import PUBLIC_PATHS, PUBLIC_PREFIXES, Auth
from gateway.deps import Gateway


@pytest_asyncio.fixture
async def gw(bus: Bus, stack_config: AppConfig) -> Gateway:
    return await Gateway.open(bus, stack_config)


@pytest_asyncio.fixture
async def app(gw: Gateway) -> FastAPI:
    return create_app(gw)


@pytest_asyncio.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        yield client


REFUSED = "missing or unknown token: send Authorization: Bearer <token>, or sign in"


def every_request(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) for each method of each route, path parameters filled in."""
    try:  # newer FastAPI keeps included routers nested; this walks into them
        from fastapi.routing import iter_route_contexts

        routes: list[Any] = list(iter_route_contexts(app.routes))
    except ImportError:
        routes = list(app.routes)
    requests = []
    for route in routes:
        path = re.sub(r"\{[^}]+\}", "x", route.path)
        requests += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
    return requests


async def test_every_route_but_health_and_docs_refuses_a_caller_without_a_token(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    requests = every_request(app)
    assert ("POST", "/api/assistants/search") in requests
    assert ("GET", "/api/langgraph/assistants/x") in requests, "the DeerFlow alias is walked too"
    answered = set()
    for method, path in requests:
        for headers in ({}, {"x-api-key": "wrong"}, {"Authorization": "Bearer wrong"}):
            response = await http.request(method, path, headers=headers, json={})
            if response.status_code != 401:
                answered.add(path)
                continue
            assert response.json() == {"detail": REFUSED}
            assert response.headers["www-authenticate"] == "Bearer"
    sign_in = {
        f"/api/v1/auth/{name}"
        for name in ("setup-status", "providers", "initialize", "login/local", "register", "logout")
    }
    single_sign_on = {"/api/v1/auth/oauth/x", "/api/v1/auth/callback/x"}  # per provider: PUBLIC_PREFIXES
    assert answered == {
        "/health",
        "/docs",
        "/docs/oauth2-redirect",
        "/openapi.json",
        *sign_in,
        *single_sign_on,
    }
    assert answered == PUBLIC_PATHS | single_sign_on
    assert all(path.startswith(PUBLIC_PREFIXES) for path in single_sign_on)


async def test_paths_no_route_has_are_refused_too_without_a_token(http: httpx.AsyncClient) -> None:
    assert (await http.get("/api/no-such-thing")).status_code == 401
    assert (await http.get("/api/no-such-thing", headers={"x-api-key": "tok-ana"})).status_code == 404


async def test_a_known_token_is_let_through_either_way(http: httpx.AsyncClient) -> None:
    for headers in ({"x-api-key": "tok-ana"}, {"Authorization": "Bearer tok-bob"}):
        response = await http.post("/api/assistants/search", json={}, headers=headers)
        assert response.status_code == 200
        assert response.json()[0]["assistant_id"] == "lead_agent"


async def test_without_tokens_configured_everyone_is_the_default_user(
    gw: Gateway, nats_url: str, stack_config: AppConfig
) -> None:
    from tests.support.runner import running_runner

    open_gw = dataclasses.replace(gw, auth=Auth(GatewayConfig()))
    transport = httpx.ASGITransport(app=create_app(open_gw))
    async with (
        running_runner(nats_url, stack_config),  # it keeps the thread records
        httpx.AsyncClient(transport=transport, base_url="http://gateway") as http,
    ):
        assert (await http.post("/api/assistants/search", json={})).status_code == 200
        created = await http.post("/api/threads", json={})
        assert created.status_code == 200
        record = await gw.threads.get(created.json()["thread_id"])
        assert record is not None
        assert record.user_id == "default"
