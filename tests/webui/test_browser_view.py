"""The browser's live view in the web UI: when the agent browses, the page's latest screenshot is
shown beside the conversation, with its title and address, and follows each new step."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import expect

from browser.service import run as run_browser
from config import AppConfig, BusConfig
from config.loader import _build
from tests.conftest import component_bus, fail_on_violations, running_component
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_pages import WebPages
from tests.support.browser import CHROMIUM, browser_ready
from tests.support.gateway import running_gateway
from tests.support.nats_users import SecuredServer
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.webui.conftest import TOKENS, UI_TESTS, OpenPage, Stack

pytestmark = UI_TESTS


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site() -> AsyncIterator[WebPages]:
    async with WebPages() as pages:
        yield pages


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Runner, sandbox broker, gateway and the browser component (on loopback, allowed by config)."""
    tmp = tmp_path_factory.mktemp("webui-browser")
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp / "data")
    bus = BusConfig(prefix=users.prefix, ack_wait_seconds=2.0, max_deliver=3)
    try:
        async with FakeOpenAI(api_key="sk-test") as model:
            data = {
                "bus": component_bus(bus, tmp / "data"),
                "models": [
                    {"name": "fake", "model": "fake-1", "api_key": "sk-test", "base_url": model.base_url}
                ],
                "memory": {"enabled": False},
                "title": {"enabled": False},
                "gateway": {"port": 0, "tokens": [{"token": TOKENS["ana"], "user_id": "ana", "admin": True}]},
                "sandbox": {"provider": "local"},
                "browser": {"enabled": True, "chromium": CHROMIUM, "allow_private_networks": True},
            }
            config: AppConfig = _build(AppConfig, data, "test config")
            url = nats_server.url
            async with (
                running_component(url, config, run_browser, "browser", browser_ready),
                running_runner(url, config),
                running_broker(url, config),
                running_gateway(url, config) as base,
            ):
                yield Stack(url=base, model=model, config=config, nats_url=url)
        fail_on_violations(users, None)
    finally:
        users.close()


async def test_the_live_view_shows_the_browsers_latest_page_beside_the_conversation(
    open_page: OpenPage, stack: Stack, site: WebPages, screenshots: Path
) -> None:
    home = f"http://127.0.0.1:{site.port}/"
    stack.model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": home})], when="LIVE-VIEW"),
        Reply(
            tool_calls=[ToolCall("browser_navigate", {"url": f"{home}about"})], when="Title: Parcel tracker"
        ),
        Reply(text="The tracker was made for tests.", when="Title: About"),
    )
    page = await open_page()
    view = page.locator("#browser-view")
    await expect(view).to_be_hidden()  # no browsing yet: no panel
    await page.locator("#input").fill("LIVE-VIEW what is the tracker?")
    await page.locator("#send").click()
    await expect(page.locator(".msg-ai .md")).to_have_text("The tracker was made for tests.")
    await expect(view).to_be_visible()
    await expect(view.locator(".browser-title")).to_have_text("About")  # the newest step's page
    await expect(view.locator(".browser-url")).to_have_text(f"{home}about")
    frame = view.locator("img.browser-frame")
    await expect(frame).to_have_attribute("src", re.compile(r"^blob:"))
    await page.wait_for_function("() => document.querySelector('#browser-view img').naturalWidth > 0")
    width = await frame.evaluate("i => i.naturalWidth")
    assert width >= 800, "a real screenshot of the page, decoded by the browser"
    box = await view.bounding_box()
    messages = await page.locator("#messages").bounding_box()
    assert box is not None
    assert messages is not None
    assert box["x"] >= messages["x"] + messages["width"] - 1, "beside the conversation, not over it"
    await page.screenshot(path=str(screenshots / "browser-view-desktop.png"))
    await view.locator(".browser-close").click()
    await expect(view).to_be_hidden()
