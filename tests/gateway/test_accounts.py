"""Signing in as DeerFlow's web UI does: `/api/v1/auth/*`, session cookies, CSRF, lockouts, scoping.

The gateway runs for real (uvicorn, runner, sandbox broker, memory updater on the test's nats-server);
a browser is an httpx client keeping cookies, sending back the `csrf_token` cookie as `X-CSRF-Token`
on state-changing requests, as the UI's fetch wrapper does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from bus import Bus
from config import AppConfig
from gateway.accounts import AccountStore
from tests.conftest import another_machine
from tests.support.gateway import running_gateway, with_gateway
from tests.support.runner import running_runner

AUTH = "/api/v1/auth"
PASSWORD = "correct horse battery"


def browser(base: str, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, timeout=30, headers=headers)


def csrf(client: httpx.AsyncClient) -> dict[str, str]:
    """What the UI's fetch wrapper adds to a POST, PUT, PATCH or DELETE."""
    return {"X-CSRF-Token": client.cookies["csrf_token"]}


async def login(client: httpx.AsyncClient, email: str, password: str = PASSWORD) -> httpx.Response:
    form = {"username": email, "password": password, "remember_me": "true"}
    return await client.post(f"{AUTH}/login/local", data=form)


@pytest_asyncio.fixture
async def accounts(bus: Bus) -> AccountStore:
    return await AccountStore.open(bus)


@pytest_asyncio.fixture
async def open_url(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    """A gateway with no tokens: single-user mode until an account exists."""
    config = with_gateway(stack_config, tokens=[])
    async with running_runner(nats_url, config), running_gateway(nats_url, config) as base:
        yield base


@pytest_asyncio.fixture
async def gateway_url(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    """The gateway alone (tokens tok-ana and tok-bob configured): signing in needs no runner."""
    async with running_gateway(nats_url, stack_config) as base:
        yield base


# ------------------------------------------------------------------ single-user mode and the first admin


async def test_the_first_admin_takes_over_single_user_mode_and_only_once(open_url: str) -> None:
    async with browser(open_url) as anyone:
        assert (await anyone.get(f"{AUTH}/setup-status")).json() == {
            "needs_setup": True,
            "registration_enabled": False,
        }
        assert (await anyone.get(f"{AUTH}/providers")).json() == {"providers": []}
        me = (await anyone.get(f"{AUTH}/me")).json()
        assert me["id"] == "default"
        assert me["system_role"] == "admin"
        earlier = (await anyone.post("/api/threads", json={})).json()["thread_id"]

        made = await anyone.post(
            f"{AUTH}/initialize", json={"email": "Boss@Example.com", "password": PASSWORD}
        )
        assert made.status_code == 201, made.text
        assert made.json() == {
            "id": "default",
            "email": "boss@example.com",
            "system_role": "admin",
            "needs_setup": False,
            "oauth_provider": None,
            "via": "session",
        }
        assert (await anyone.get(f"{AUTH}/me")).json()["email"] == "boss@example.com", "signed in at once"
        found = await anyone.post("/api/threads/search", json={}, headers=csrf(anyone))
        assert [t["thread_id"] for t in found.json()] == [earlier], "single-user mode's threads are kept"

        again = await anyone.post(f"{AUTH}/initialize", json={"email": "x@example.com", "password": PASSWORD})
        assert again.status_code == 409
        assert again.json()["code"] == "system_already_initialized"
        assert (await anyone.get(f"{AUTH}/setup-status")).json()["needs_setup"] is False

    async with browser(open_url) as stranger:
        assert (await stranger.get(f"{AUTH}/me")).status_code == 401, "sign-in is needed from now on"
        assert (await stranger.get(f"{AUTH}/providers")).status_code == 200, "the sign-in page asks"
        assert (await stranger.post("/api/threads/search", json={})).status_code == 401


# ------------------------------------------------------------------ signing in


async def test_signing_in_sets_an_httponly_session_and_a_readable_csrf_cookie(
    gateway_url: str, accounts: AccountStore
) -> None:
    await accounts.create("carol@example.com", PASSWORD, user_id="carol")
    async with browser(gateway_url) as carol:
        assert (await carol.get(f"{AUTH}/me")).status_code == 401
        answer = await login(carol, "CAROL@example.com")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"expires_in": 7 * 86400, "needs_setup": False}
        cookies = {c.split("=", 1)[0]: c.lower() for c in answer.headers.get_list("set-cookie")}
        assert "httponly" in cookies["access_token"]
        assert "samesite=lax" in cookies["access_token"]
        assert "httponly" not in cookies["csrf_token"], "the page must read it to send it back"
        assert "samesite=strict" in cookies["csrf_token"]
        me = (await carol.get(f"{AUTH}/me")).json()
        assert (me["id"], me["email"], me["system_role"]) == ("carol", "carol@example.com", "user")


async def test_a_wrong_password_is_refused_and_repeated_failures_lock_the_account(
    gateway_url: str, accounts: AccountStore
) -> None:
    await accounts.create("dave@example.com", PASSWORD)
    async with browser(gateway_url) as dave:
        wrong = await login(dave, "dave@example.com", "not the password")
        assert wrong.status_code == 401
        assert wrong.json()["code"] == "invalid_credentials"
        assert "access_token" not in dave.cookies
        nobody = await login(dave, "nobody@example.com", "whatever1")
        assert nobody.json() == wrong.json(), "an unknown address is told apart from nothing"
        for _ in range(3):
            assert (await login(dave, "dave@example.com", "still wrong")).status_code == 401
        locked = await login(dave, "dave@example.com")
        assert locked.status_code == 429, "even the right password waits out the lockout"
        assert "too many failed sign-ins" in locked.json()["detail"]
        assert "access_token" not in dave.cookies


async def test_a_locked_account_stays_locked_under_another_spelling_of_its_address(
    nats_url: str, stack_config: AppConfig, accounts: AccountStore
) -> None:
    """The lockout counts per account as the account store knows it: `ｅ` (fullwidth) is `e`."""
    await accounts.create("carol@example.com", PASSWORD)
    config = with_gateway(stack_config, auth={"trusted_proxies": ["127.0.0.1/32"]})
    async with (
        running_gateway(nats_url, config) as base,
        browser(base, **{"X-Forwarded-For": "203.0.113.7"}) as guesser,
        browser(base, **{"X-Forwarded-For": "198.51.100.9"}) as elsewhere,
    ):
        for _ in range(5):
            assert (await login(guesser, "carol@example.com", "a wrong guess")).status_code == 401
        for spelling in ("carol@\uff45xample.com", "CAROL@EXAMPLE.COM", " carol@example.com"):
            answer = await login(elsewhere, spelling)
            assert answer.status_code == 429, f"{spelling!r} from another address: {answer.text}"
        assert "access_token" not in elsewhere.cookies


async def test_signing_out_ends_the_browser_session(gateway_url: str, accounts: AccountStore) -> None:
    await accounts.create("erin@example.com", PASSWORD)
    async with browser(gateway_url) as erin:
        await login(erin, "erin@example.com")
        assert (await erin.get(f"{AUTH}/me")).status_code == 200
        assert (await erin.post(f"{AUTH}/logout")).status_code == 200
        assert "access_token" not in erin.cookies
        assert (await erin.get(f"{AUTH}/me")).status_code == 401


async def test_a_state_changing_request_by_cookie_needs_the_csrf_token(
    api_url: str, accounts: AccountStore
) -> None:
    await accounts.create("fay@example.com", PASSWORD)
    async with browser(api_url) as fay:
        await login(fay, "fay@example.com")
        missing = await fay.post("/api/threads", json={})
        assert missing.status_code == 403
        assert "X-CSRF-Token" in missing.json()["detail"]
        wrong = await fay.post("/api/threads", json={}, headers={"X-CSRF-Token": "guessed"})
        assert wrong.status_code == 403
        assert (await fay.post("/api/threads", json={}, headers=csrf(fay))).status_code == 200
        assert (await fay.get("/api/models")).status_code == 200, "reads need no token"
    async with browser(api_url, **{"x-api-key": "tok-bob"}) as script:
        assert (await script.post("/api/threads", json={})).status_code == 200, "bearer callers need none"


async def test_sign_in_from_another_site_is_refused(gateway_url: str, accounts: AccountStore) -> None:
    await accounts.create("gus@example.com", PASSWORD)
    async with browser(gateway_url, Origin="http://evil.example") as evil:
        refused = await login(evil, "gus@example.com")
        assert refused.status_code == 403
        assert "access_token" not in evil.cookies
    async with browser(gateway_url, Origin=gateway_url) as same_site:
        assert (await login(same_site, "gus@example.com")).status_code == 200


async def test_an_expired_or_forged_cookie_is_not_a_session(gateway_url: str, accounts: AccountStore) -> None:
    account = await accounts.create("hal@example.com", PASSWORD)
    secret = await accounts.session_secret()

    class EightDaysAgo(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - 8 * 86400

    payload = {"a": account.key, "v": account.token_version}
    fresh = URLSafeTimedSerializer(secret, salt="antler-session").dumps(payload)
    expired = URLSafeTimedSerializer(secret, salt="antler-session", signer=EightDaysAgo).dumps(payload)
    forged = URLSafeTimedSerializer("not the secret", salt="antler-session").dumps(payload)
    async with browser(gateway_url) as hal:
        hal.cookies.set("access_token", fresh)
        assert (await hal.get(f"{AUTH}/me")).json()["email"] == "hal@example.com", "the control"
        for cookie in (expired, forged):
            hal.cookies.set("access_token", cookie)
            assert (await hal.get(f"{AUTH}/me")).status_code == 401
            assert (await hal.get("/api/models")).status_code == 401


async def test_changing_the_password_ends_other_sessions(gateway_url: str, accounts: AccountStore) -> None:
    await accounts.create("ida@example.com", PASSWORD)
    async with browser(gateway_url) as laptop, browser(gateway_url) as phone:
        await login(laptop, "ida@example.com")
        await login(phone, "ida@example.com")
        body = {"current_password": "wrong one", "new_password": "a new passphrase"}
        refused = await laptop.post(f"{AUTH}/change-password", json=body, headers=csrf(laptop))
        assert refused.status_code == 400
        body["current_password"] = PASSWORD
        changed = await laptop.post(f"{AUTH}/change-password", json=body, headers=csrf(laptop))
        assert changed.status_code == 200, changed.text
        assert (await laptop.get(f"{AUTH}/me")).status_code == 200, "this browser got a new session"
        assert (await phone.get(f"{AUTH}/me")).status_code == 401
        assert (await login(phone, "ida@example.com", "a new passphrase")).status_code == 200


async def test_registration_is_open_only_when_config_allows(
    nats_url: str, stack_config: AppConfig, api_url: str, tmp_path: Path
) -> None:
    body = {"email": "new@example.com", "password": PASSWORD}
    async with browser(api_url) as visitor:
        closed = await visitor.post(f"{AUTH}/register", json=body)
        assert closed.status_code == 403
        assert (await visitor.get(f"{AUTH}/setup-status")).json()["registration_enabled"] is False
    config = with_gateway(stack_config, auth={"allow_registration": True})
    config.bus.data_dir = another_machine(config.bus.data_dir, tmp_path / "second-gateway")  # its URL file
    async with running_gateway(nats_url, config) as base, browser(base) as visitor:
        made = await visitor.post(f"{AUTH}/register", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["system_role"] == "user"
        assert (await visitor.get(f"{AUTH}/me")).json()["email"] == "new@example.com"
        twice = await visitor.post(f"{AUTH}/register", json=body)
        assert twice.status_code == 400
        assert twice.json()["code"] == "email_already_exists"


# ------------------------------------------------------------------ whose things a cookie reaches


async def test_a_cookie_user_reaches_only_their_own_things_and_shares_a_token_users(
    api_url: str, accounts: AccountStore
) -> None:
    await accounts.create("ana@example.com", PASSWORD, user_id="ana")  # the same user as token tok-ana
    await accounts.create("carol@example.com", PASSWORD, user_id="carol")
    async with browser(f"{api_url}/api", **{"x-api-key": "tok-ana"}) as token:
        thread = (await token.post("/threads", json={})).json()["thread_id"]
        await token.post(f"/threads/{thread}/uploads", files=[("files", ("a.txt", b"ana's", "text/plain"))])
        body = {"input": {"messages": [{"role": "user", "content": "hello"}]}}
        waited = await token.post(f"/threads/{thread}/runs/wait", json=body)
        run = waited.headers["location"].split("/")[-2]
        await token.post("/memory/facts", json={"content": "Ana likes tea"})
        assert (
            await token.post("/agents", json={"name": "tea-sommelier", "soul": "Talk tea."})
        ).status_code == 201

    async with browser(api_url) as carol:
        await login(carol, "carol@example.com")
        assert (await carol.post("/api/threads/search", json={}, headers=csrf(carol))).json() == []
        for path in (
            f"/api/threads/{thread}",
            f"/api/threads/{thread}/runs",
            f"/api/threads/{thread}/runs/{run}",
            f"/api/threads/{thread}/uploads/list",
            f"/api/threads/{thread}/artifacts/mnt/user-data/uploads/a.txt",
            f"/api/threads/{thread}/messages/page",
        ):
            assert (await carol.get(path)).status_code == 404, path
        assert (await carol.get("/api/memory")).json()["facts"] == []
        assert (await carol.get("/api/agents")).json() == {"agents": []}
        assert (await carol.get("/api/agents/tea-sommelier")).status_code == 404

    async with browser(api_url) as ana:
        await login(ana, "ana@example.com")
        found = (await ana.post("/api/threads/search", json={}, headers=csrf(ana))).json()
        assert [t["thread_id"] for t in found] == [thread], "the account is token user ana"
        file = await ana.get(f"/api/threads/{thread}/artifacts/mnt/user-data/uploads/a.txt")
        assert file.content == b"ana's"
        assert (await ana.get(f"/api/threads/{thread}/runs/{run}")).json()["status"] == "success"
        assert [f["content"] for f in (await ana.get("/api/memory")).json()["facts"]] == ["Ana likes tea"]
        assert [a["name"] for a in (await ana.get("/api/agents")).json()["agents"]] == ["tea-sommelier"]
