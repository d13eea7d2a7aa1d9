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


@dataclass
class IdP:
    issuer: str

    async def tamper_next(self, mode: str) -> None:
        """The next token response carries a bad ID token: wrong_audience, expired or bad_signature."""
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{self.issuer}/test/next-id-token", json={"mode": mode})
            answer.raise_for_status()


def antler_client(port: int, secret: str) -> dict[str, Any]:
    """The provider's registration of an Antler gateway on `port` signing people in as provider `corp`."""
    return {
        "client_id": "antler",
        "client_secret": secret,
        "redirect_uris": [f"http://127.0.0.1:{port}/api/v1/auth/callback/corp"],
        "post_logout_redirect_uris": [f"http://127.0.0.1:{port}/"],
    }


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
