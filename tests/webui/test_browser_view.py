"""The browser's live view in the web UI: when the agent browses, the page's latest screenshot is
shown beside the conversation, with its title and address, and follows each new step."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import expect

from browser.service import run as run_browser
from tests.conftest import running_component
from tests.fakes.openai_server import Reply, ToolCall
from tests.fakes.web_pages import WebPages
from tests.support.browser import CHROMIUM, browser_ready
from tests.support.nats_users import SecuredServer
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker
from tests.webui.conftest import UI_TESTS, OpenPage, Stack, module_ui_stack
from tests.webui.pages import send

pytestmark = UI_TESTS


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site() -> AsyncIterator[WebPages]:
    async with WebPages() as pages:
        yield pages


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Runner, sandbox broker, gateway and the browser component (on loopback, allowed by config)."""
    browser = functools.partial(running_component, entry=run_browser, name="browser", ready=browser_ready)
    async with module_ui_stack(
        nats_server,
        tmp_path_factory.mktemp("webui-browser"),
        (browser, running_runner, running_broker),
        browser={"enabled": True, "chromium": CHROMIUM, "allow_private_networks": True},
    ) as up:
        yield up


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
    await send(page, "LIVE-VIEW what is the tracker?")
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
