"""The agent's browser: a page opened, a form filled, its answer read and captured, through the bus."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from browser.egress import EgressProxy, Refused, checked_addresses
from bus import Bus
from bus.files import output_key
from bus.messages.browser import BrowserReply, BrowserRequest
from bus.service import ServiceError, call
from tests.browser.conftest import ask, tool_results
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_pages import WebPages
from tests.support.runner import submit_and_collect

pytestmark = pytest.mark.asyncio


async def test_the_agent_fills_a_form_reads_the_answer_and_saves_a_screenshot(
    bus: Bus, fake_model: FakeOpenAI, site: WebPages, browser_component: Bus, runner: None
) -> None:
    home = f"http://127.0.0.1:{site.port}/"
    fake_model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": home})]),
        Reply(
            tool_calls=[ToolCall("browser_type", {"ref": 1, "text": "PX-42", "submit": True})],
            when="[2] button",
        ),
        Reply(tool_calls=[ToolCall("browser_get_text", {})], when="Typed into [1]"),
        Reply(
            tool_calls=[ToolCall("browser_screenshot", {"filename": "parcel.png"})], when="out for delivery"
        ),
        Reply(text="Your parcel PX-42 is out for delivery in Lyon.", when="Saved the screenshot"),
    )
    events = await submit_and_collect(bus, ask("t-browse", "Where is parcel PX-42?"), timeout=120)
    assert events[-1].data["status"] == "success"

    results = tool_results(fake_model)
    opened = results[0]
    assert "Title: Parcel tracker" in opened
    assert "[1] input type=text: Tracking number" in opened, "the model addresses fields by number"
    assert "Parcel PX-42 is out for delivery in Lyon." in results[2], (
        "the answer page's text reached the model"
    )
    assert results[3] == "Saved the screenshot to /mnt/user-data/outputs/parcel.png"
    shot = await (await bus.files()).get(output_key("default", "t-browse", "parcel.png"))
    assert shot.data is not None
    assert shot.data.startswith(b"\x89PNG"), "a real screenshot is in the thread's outputs"
    frame = await (await bus.files()).get(output_key("default", "t-browse", ".browser/latest.jpg"))
    assert frame.data is not None
    assert frame.data.startswith(b"\xff\xd8"), "the live view's latest frame is kept"


async def test_web_capture_saves_a_rendered_page_as_pdf(
    bus: Bus, fake_model: FakeOpenAI, site: WebPages, browser_component: Bus, runner: None
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall(
                    "web_capture", {"url": f"http://127.0.0.1:{site.port}/about", "output_format": "pdf"}
                )
            ]
        ),
        Reply(text="Captured.", when="Captured http"),
    )
    events = await submit_and_collect(bus, ask("t-capture", "Capture the about page"), timeout=120)
    assert events[-1].data["status"] == "success"
    (result,) = tool_results(fake_model)
    name = f"capture-127-0-0-1-{site.port}.pdf"  # named after the site when no name is given
    assert result.endswith(f"(About) to /mnt/user-data/outputs/{name}"), result
    pdf = await (await bus.files()).get(output_key("default", "t-capture", name))
    assert pdf.data is not None
    assert pdf.data.startswith(b"%PDF")


async def act(bus: Bus, thread: str, **fields: Any) -> BrowserReply:
    """What the agent's tools do: the thread's holder first, any browser when none holds it."""
    from bus.errors import NoResponders
    from bus.messages.browser import browser_thread_subject

    request = BrowserRequest(thread_id=thread, **fields)
    try:
        reply = await bus.request(
            browser_thread_subject(bus.subjects.prefix, "default", thread), request, BrowserReply, timeout=60
        )
    except NoResponders:
        return await call(bus, "browser", "act", request, BrowserReply, timeout=60)
    if reply.error is not None:
        raise ServiceError(reply.error.message, reply.error.code)
    return reply


async def test_two_threads_browse_at_once_without_seeing_each_others_cookies(
    bus: Bus, site: WebPages, browser_component: Bus
) -> None:
    base = f"http://127.0.0.1:{site.port}"
    await asyncio.gather(
        act(bus, "t-ana", action="navigate", url=f"{base}/remember?v=ana-secret"),
        act(bus, "t-bob", action="navigate", url=f"{base}/remember?v=bob-secret"),
    )
    ana, bob = await asyncio.gather(
        act(bus, "t-ana", action="navigate", url=f"{base}/cookie"),
        act(bus, "t-bob", action="navigate", url=f"{base}/cookie"),
    )
    ana_text = (await act(bus, "t-ana", action="text")).text
    bob_text = (await act(bus, "t-bob", action="text")).text
    assert ana.title == bob.title == "cookie"
    assert "cookie: ana-secret" in ana_text
    assert "cookie: bob-secret" in bob_text
    fresh = await act(bus, "t-carol", action="navigate", url=f"{base}/cookie")
    assert fresh.url.endswith("/cookie")
    assert "cookie: none" in (await act(bus, "t-carol", action="text")).text


async def test_an_action_without_an_open_page_says_to_navigate_first(
    bus: Bus, browser_component: Bus
) -> None:
    with pytest.raises(ServiceError, match="browser_navigate") as caught:
        await act(bus, "t-nothing-open", action="click", ref=1)
    assert caught.value.code == "not_found"


@pytest.mark.parametrize(
    "address",
    [
        pytest.param("127.0.0.1", id="loopback"),
        pytest.param("169.254.169.254", id="cloud-metadata"),
        pytest.param("10.1.2.3", id="private"),
        pytest.param("::1", id="ipv6-loopback"),
        pytest.param("::ffff:192.168.0.1", id="ipv4-mapped-private"),
    ],
)
async def test_non_public_addresses_are_refused_on_defaults(address: str) -> None:
    with pytest.raises(Refused, match="non-public"):
        await checked_addresses(address, 80, allow_private=False)


async def test_the_proxy_refuses_loopback_so_no_redirect_or_subresource_reaches_it(site: WebPages) -> None:
    proxy = EgressProxy(allow_private=False)
    port = await proxy.start()
    try:
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}") as client:
            response = await client.get(f"http://127.0.0.1:{site.port}/")
        assert response.status_code == 403
        assert "address policy" in response.text
        assert "Parcel tracker" not in response.text
    finally:
        await proxy.stop()
    allowed = EgressProxy(allow_private=True)
    port = await allowed.start()
    try:
        async with httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}") as client:
            response = await client.get(f"http://127.0.0.1:{site.port}/")
        assert "Parcel tracker" in response.text, "allowed by config, the page comes through"
    finally:
        await allowed.stop()
