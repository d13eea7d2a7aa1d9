"""Single sign-on through a real OpenID provider (oidc-provider under node, on loopback).

A person's browser is an httpx client with a cookie jar, following the redirects one by one:
Antler's `/api/v1/auth/oauth/<provider>` → the provider's sign-in form → its consent → Antler's
callback → the web UI. Bad ID tokens (wrong audience, expired, signed with another key), a replayed
code and an unverified address are refused, and the person stays signed out.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from gateway.accounts import AccountStore
from tests.support.gateway import running_gateway
from tests.support.oidc_idp import ALICE, IdP, antler_client, provider_config, running_idp, sign_in, walk
from tests.support.ports import free_port

AUTH = "/api/v1/auth"
PEOPLE = {
    "alice": ALICE,
    "boss": {"password": "boss-pw", "email": "boss@example.com", "email_verified": True, "groups": ["ops"]},
    "carol": {"password": "carol-pw", "email": "carol@example.com", "email_verified": True, "groups": []},
    "mallory": {"password": "m-pw", "email": "mallory@example.com", "email_verified": False, "groups": []},
}


@dataclass
class Stack:
    base: str
    idp: IdP


def sso_config(stack_config: AppConfig, issuer: str, port: int) -> AppConfig:
    data: dict[str, Any] = stack_config.model_dump(mode="json")
    data["gateway"]["port"] = port
    data["gateway"]["auth"]["oidc"] = [provider_config(issuer, {"ops": "admin", "eng": "engineer"})]
    data["access"] = {
        "roles": {
            "member": {"models": ["*"]},
            "engineer": {"models": ["fake"], "tools": ["bash", "group:web"]},
        }
    }
    return AppConfig.model_validate(data)


@pytest_asyncio.fixture
async def stack(nats_url: str, stack_config: AppConfig) -> AsyncIterator[Stack]:
    port = free_port()
    async with running_idp([antler_client(port)], PEOPLE) as idp:
        config = sso_config(stack_config, idp.issuer, port)
        async with running_gateway(nats_url, config) as base:
            yield Stack(base, idp)


async def start_and_sign_in(
    client: httpx.AsyncClient, stack: Stack, login: str, *, stop_at: str | None = None
) -> httpx.Response:
    """Press the provider's button on Antler's sign-in page, then fill in the provider's form."""
    return await sign_in(client, stack.base, "corp", login, PEOPLE[login]["password"], stop_at=stop_at)


def browser() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=30)


async def test_the_sign_in_page_lists_the_configured_providers(stack: Stack) -> None:
    async with browser() as client:
        answer = await client.get(f"{stack.base}{AUTH}/providers")
    assert answer.json() == {"providers": [{"id": "corp", "display_name": "Corp SSO", "type": "oidc"}]}


async def test_a_person_signs_in_through_the_provider_gets_an_account_and_the_role_their_group_maps_to(
    stack: Stack, bus: Bus
) -> None:
    async with browser() as client:
        assert (await client.get(f"{stack.base}{AUTH}/me")).status_code == 401
        landed = await start_and_sign_in(client, stack, "alice")
        assert landed.status_code == 200
        assert str(landed.url) == f"{stack.base}/"
        me = (await client.get(f"{stack.base}{AUTH}/me")).json()
        assert me["email"] == "alice@example.com"
        assert me["system_role"] == "user"
        profile = (await client.get(f"{stack.base}/api/user-profile")).json()
        assert profile["role"] == "engineer"
        assert profile["models"] == ["fake"]
        # A state-changing request works with the CSRF cookie the callback set.
        headers = {"X-CSRF-Token": client.cookies["csrf_token"]}
        written = await client.put(
            f"{stack.base}/api/user-profile", json={"content": "I review Go code"}, headers=headers
        )
        assert written.status_code == 200
        assert written.json()["content"] == "I review Go code"
    # Signing in again (another browser) is the same account, found by the provider's subject.
    async with browser() as again:
        await start_and_sign_in(again, stack, "alice")
        assert (await again.get(f"{stack.base}{AUTH}/me")).json()["id"] == me["id"]
    account = await (await AccountStore.open(bus)).get("alice@example.com")
    assert account is not None
    assert account.identities == {"corp": "alice"}
    assert account.password_hash is None


async def test_the_ops_group_maps_to_admin(stack: Stack) -> None:
    async with browser() as client:
        await start_and_sign_in(client, stack, "boss")
        assert (await client.get(f"{stack.base}{AUTH}/me")).json()["system_role"] == "admin"


async def test_an_existing_password_account_is_linked_by_its_verified_address(stack: Stack, bus: Bus) -> None:
    accounts = await AccountStore.open(bus)
    made = await accounts.create("carol@example.com", "carol's long password")
    async with browser() as client:
        await start_and_sign_in(client, stack, "carol")
        assert (await client.get(f"{stack.base}{AUTH}/me")).json()["id"] == made.user_id


@pytest.mark.parametrize("mode", ["wrong_audience", "expired", "bad_signature"])
async def test_a_bad_id_token_is_refused_and_nobody_is_signed_in(stack: Stack, mode: str) -> None:
    await stack.idp.tamper_next(mode)
    async with browser() as client:
        landed = await start_and_sign_in(client, stack, "alice")
        assert landed.url.params.get("sso_error") == "sso_bad_token"
        assert (await client.get(f"{stack.base}{AUTH}/me")).status_code == 401
        assert "access_token" not in client.cookies


async def test_a_replayed_code_is_refused(stack: Stack) -> None:
    async with browser() as client:
        to_callback = await start_and_sign_in(client, stack, "alice", stop_at=f"{AUTH}/callback/")
        callback = str(to_callback.url.join(to_callback.headers["location"]))
        state_cookie = client.cookies.get("antler_sso_corp")
        assert state_cookie
        assert (await walk(client, await client.get(callback))).status_code == 200  # the first use
    async with browser() as thief:  # the same code (and even the state cookie) again
        thief.cookies.set("antler_sso_corp", state_cookie, domain="127.0.0.1")
        landed = await walk(thief, await thief.get(callback))
        assert landed.url.params.get("sso_error") == "sso_failed"
        assert (await thief.get(f"{stack.base}{AUTH}/me")).status_code == 401


async def test_a_callback_without_its_state_cookie_is_refused(stack: Stack) -> None:
    async with browser() as client:
        to_callback = await start_and_sign_in(client, stack, "alice", stop_at=f"{AUTH}/callback/")
        callback = str(to_callback.url.join(to_callback.headers["location"]))
    async with browser() as other:
        landed = await walk(other, await other.get(callback))
        assert landed.url.params.get("sso_error") == "sso_state"


async def test_an_unverified_address_gets_no_account(stack: Stack) -> None:
    async with browser() as client:
        landed = await start_and_sign_in(client, stack, "mallory")
        assert landed.url.params.get("sso_error") == "sso_not_allowed"
        assert (await client.get(f"{stack.base}{AUTH}/me")).status_code == 401


async def test_bad_requests_name_what_is_wrong(stack: Stack) -> None:
    async with browser() as client:
        missing = await client.get(f"{stack.base}{AUTH}/callback/corp", params={"state": "x"})
        assert missing.status_code == 400
        assert missing.json()["detail"].startswith("code:")
        unknown = await client.get(f"{stack.base}{AUTH}/oauth/nope")
        assert unknown.status_code == 404
        assert "corp" in unknown.json()["detail"]


async def test_signing_out_ends_the_providers_session_too(stack: Stack) -> None:
    async with browser() as client:
        await start_and_sign_in(client, stack, "alice")
        # While the provider's session lives, its button signs in again without asking anything.
        again = await walk(client, await client.get(f"{stack.base}{AUTH}/oauth/corp", params={"next": "/"}))
        assert str(again.url) == f"{stack.base}/"

        headers = {"X-CSRF-Token": client.cookies["csrf_token"]}
        out = await client.post(f"{stack.base}{AUTH}/logout", headers=headers)
        assert out.status_code == 200
        end = httpx.URL(out.json()["end_session_url"])
        assert str(end).startswith(stack.idp.issuer)
        assert end.params["post_logout_redirect_uri"] == f"{stack.base}/"
        assert (await client.get(f"{stack.base}{AUTH}/me")).status_code == 401

        confirm = await walk(client, await client.get(str(end)))  # the provider asks "sign out?"
        action = re.search(r'action="([^"]+)"', confirm.text)
        xsrf = re.search(r'name="xsrf" value="([^"]+)"', confirm.text)
        assert action, confirm.text
        assert xsrf, confirm.text
        back = await walk(
            client,
            await client.post(
                str(confirm.url.join(action.group(1))), data={"xsrf": xsrf.group(1), "logout": "yes"}
            ),
        )
        assert str(back.url) == f"{stack.base}/"

        # The provider's session is over: its button leads to its sign-in form again.
        form_page = await walk(
            client, await client.get(f"{stack.base}{AUTH}/oauth/corp", params={"next": "/"})
        )
        assert 'name="password"' in form_page.text

    async with browser() as client:  # a password or token session has no provider to sign out of
        out = await client.post(f"{stack.base}{AUTH}/logout")
        assert out.json()["end_session_url"] is None
