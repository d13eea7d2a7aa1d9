"""Single sign-on in the web UI, in real Chromium against a real OpenID provider (oidc-provider under
node): the sign-in page offers the configured provider, the provider's own form signs the person in,
they land in the app with the role their group maps to, and Settings → Account takes a chat's
`/connect` code."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from playwright.async_api import Browser, expect

from access import RoleBook
from bus import Bus
from config import AppConfig, BusConfig
from config.loader import _build
from tests.conftest import component_bus, fail_on_violations
from tests.support.gateway import running_gateway
from tests.support.nats_users import SecuredServer
from tests.support.oidc_idp import ALICE, antler_client, provider_config, running_idp
from tests.support.ports import free_port
from tests.webui.conftest import DESKTOP, UI_TESTS

pytestmark = UI_TESTS

PEOPLE = {"alice": ALICE}


@dataclass
class SSOStack:
    url: str
    nats_url: str
    admin: BusConfig


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sso_stack(
    nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SSOStack]:
    """A gateway (nothing else: signing in and the settings need no runner) with one identity provider."""
    tmp = tmp_path_factory.mktemp("webui-sso")
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp / "data")
    bus = BusConfig(prefix=users.prefix)
    port = free_port()
    try:
        async with running_idp([antler_client(port)], PEOPLE) as idp:
            data = {
                "bus": component_bus(bus, tmp / "data"),
                "models": [
                    {
                        "name": "fake",
                        "model": "fake-1",
                        "api_key": "sk-test",
                        "base_url": "http://127.0.0.1:9",
                    }
                ],
                "gateway": {
                    "port": port,
                    "auth": {"oidc": [provider_config(idp.issuer, {"eng": "engineer"})]},
                },
                "access": {"roles": {"member": {}, "engineer": {"models": ["fake"]}}},
            }
            config = _build(AppConfig, data, "test config")
            async with running_gateway(nats_server.url, config) as base:
                admin = bus.model_copy(update={"user": users.admin.user, "password": users.admin.password})
                yield SSOStack(url=base, nats_url=nats_server.url, admin=admin)
        fail_on_violations(users, None)
    finally:
        users.close()


async def test_a_person_signs_in_with_the_provider_button_and_enters_a_connect_code(
    browser: Browser, sso_stack: SSOStack
) -> None:
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.goto(sso_stack.url + "/")
        button = page.get_by_role("link", name="Sign in with Corp SSO")
        await expect(button).to_be_visible()
        await button.click()

        # The provider's own sign-in form, on the provider's origin.
        await page.get_by_label("Login").fill("alice")
        await page.get_by_label("Password").fill("alice-pw")
        await page.locator("#idp-submit").click()

        await page.locator("#app").wait_for()
        assert page.url == sso_stack.url + "/"
        await page.goto(sso_stack.url + "/#/settings/account")
        await expect(page.locator(".account-who")).to_have_text("alice@example.com · role engineer")
        await expect(page.locator(".usage li[data-period=day]")).to_contain_text("Today: 0 tokens")

        bus = await Bus.connect(sso_stack.nats_url, sso_stack.admin, name="test")
        try:
            code = await (await RoleBook.open(bus)).new_code("telegram:42", 600)
            code_box = page.get_by_label("Connect code")
            await code_box.fill("ZZZZ-ZZZZ")
            await page.get_by_role("button", name="Connect").click()
            await expect(page.locator("#toast")).to_contain_text("code: unknown, already used or expired")
            await code_box.fill(code)
            await page.get_by_role("button", name="Connect").click()
            await expect(page.locator(".connect-result")).to_contain_text("Connected: telegram:42 is you now")
            me = await page.evaluate("fetch('/api/v1/auth/me').then((r) => r.json())")
            assert await (await RoleBook.open(bus)).linked_user("telegram:42") == me["id"]
        finally:
            await bus.close()
    finally:
        await context.close()
