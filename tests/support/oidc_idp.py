"""A real OpenID provider for the tests: tests/support/oidc_idp/idp.mjs (panva's oidc-provider) under node.

`make install` puts oidc-provider in tests/support/oidc_idp/node_modules (target `oidc-idp`). The
provider runs on loopback with the clients and accounts given, signs people in through its own form,
and can be told to hand out one tampered ID token (`tamper_next`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

IDP_DIR = Path(__file__).parent / "oidc_idp"
PROVIDER = "corp"  # the provider's name in Antler's config and URLs
CLIENT_SECRET = "antler-client-secret-for-the-test-idp"
ALICE = {"password": "alice-pw", "email": "alice@example.com", "email_verified": True, "groups": ["eng"]}


def antler_client(port: int) -> dict[str, Any]:
    """Antler registered at the provider, as the gateway on loopback `port` calls back."""
    return {
        "client_id": "antler",
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [f"http://127.0.0.1:{port}/api/v1/auth/callback/{PROVIDER}"],
        "post_logout_redirect_uris": [f"http://127.0.0.1:{port}/"],
    }


def provider_config(issuer: str, role_map: dict[str, str]) -> dict[str, Any]:
    """The provider in Antler's config (`gateway.auth.oidc[]`), groups mapped to roles by `role_map`."""
    return {
        "name": PROVIDER,
        "display_name": "Corp SSO",
        "issuer": issuer,
        "client_id": "antler",
        "client_secret": CLIENT_SECRET,
        "scopes": ["openid", "email", "profile", "groups"],
        "role_map": role_map,
    }


@dataclass
class IdP:
    issuer: str

    async def tamper_next(self, mode: str) -> None:
        """The next token response carries a bad ID token: wrong_audience, expired or bad_signature."""
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{self.issuer}/test/next-id-token", json={"mode": mode})
            answer.raise_for_status()


async def walk(
    client: httpx.AsyncClient, response: httpx.Response, stop_at: str | None = None
) -> httpx.Response:
    """Follow redirects as a browser does (cookies kept per host), stopping before a URL containing
    `stop_at` (the response that points there is returned)."""
    for _ in range(20):
        if response.status_code not in (302, 303):
            return response
        target = str(response.url.join(response.headers["location"]))
        if stop_at and stop_at in target:
            return response
        response = await client.get(target)
    raise AssertionError("too many redirects")


async def sign_in(
    client: httpx.AsyncClient,
    gateway: str,
    provider: str,
    login: str,
    password: str,
    *,
    stop_at: str | None = None,
) -> httpx.Response:
    """Press the provider's button on Antler's sign-in page (`gateway`: its origin), then fill in the
    provider's form, as a person's browser (`client`, with a cookie jar) does."""
    start = await client.get(f"{gateway}/api/v1/auth/oauth/{provider}", params={"next": "/"})
    form_page = await walk(client, start)
    assert form_page.status_code == 200, form_page.text
    action = re.search(r'action="([^"]+)"', form_page.text)
    assert action, form_page.text
    answer = await client.post(
        str(form_page.url.join(action.group(1))), data={"login": login, "password": password}
    )
    return await walk(client, answer, stop_at=stop_at)


@contextlib.asynccontextmanager
async def running_idp(
    clients: list[dict[str, Any]], accounts: dict[str, dict[str, Any]]
) -> AsyncIterator[IdP]:
    node = shutil.which("node")
    if node is None or not (IDP_DIR / "node_modules" / "oidc-provider").is_dir():
        pytest.fail("the SSO tests need node and oidc-provider: `make install` (target oidc-idp)")
    env = {**os.environ, "IDP_CLIENTS": json.dumps(clients), "IDP_ACCOUNTS": json.dumps(accounts)}
    process = await asyncio.create_subprocess_exec(
        node,
        str(IDP_DIR / "idp.mjs"),
        cwd=IDP_DIR,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        issuer = None
        async with asyncio.timeout(20):
            while issuer is None:
                line = (await process.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"the IdP exited ({await process.wait()})")
                found = re.match(r"listening on (\S+)", line)
                issuer = found.group(1) if found else None

        async def drain() -> None:  # its warnings and errors, so the pipe never fills
            assert process.stdout is not None
            while await process.stdout.readline():
                pass

        draining = asyncio.create_task(drain())
        yield IdP(issuer)
        draining.cancel()
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                process.kill()
                await process.wait()
