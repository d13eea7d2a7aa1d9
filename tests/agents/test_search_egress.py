"""The run's egress policy holds `web_search` and `image_search` (they send the model's query, which
an injected page can fill with the user's data, to a provider): `none` asks no provider, `allowlist`
only one whose host is listed, unset as before. Local fakes of the providers over real HTTP; names
pinned to them with `egress.hosts` (no DNS in tests), as in tests/agents/test_injected_tool_calls.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agents.tools.community import EgressRefused
from agents.tools.community.image_search import ImageSearchSettings, find_images
from agents.tools.community.web_search import WebSearchSettings, find
from bus import Bus
from bus.messages import EgressPolicy
from tests.fakes.duckduckgo import FakeDuckDuckGo, Page
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_providers import FakeSearxng, FakeTavily, FakeWebsite, Hit
from tests.support.runner import StartRunner, ask, submit_and_collect

SEARCH = "agents.tools.community.web_search:make_web_search"
IMAGES = "agents.tools.community.image_search:make_image_search"


@pytest_asyncio.fixture
async def searxng() -> AsyncIterator[FakeSearxng]:
    async with FakeSearxng() as fake:
        fake.results = [Hit("Moths", "https://moths.example/luna", "Luna moths live a week.")]
        yield fake


@pytest_asyncio.fixture
async def tavily() -> AsyncIterator[FakeTavily]:
    async with FakeTavily(api_key="tvly-test") as fake:
        fake.results = [Hit("Moths", "https://moths.example/luna", "Luna moths live a week.")]
        fake.images = [("https://img.example/luna.jpg", "A luna moth")]
        yield fake


@pytest_asyncio.fixture
async def ddg(tmp_path: Path) -> AsyncIterator[FakeDuckDuckGo]:
    async with FakeDuckDuckGo(tmp_path) as fake:
        fake.pages = [Page("Moths", "https://moths.example/luna", "Luna moths live a week.")]
        yield fake


def port_of(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1].split("/")[0])


def policy(mode: str, *allow: str, **more: Any) -> EgressPolicy:
    """A run's policy as `access.egress` makes it; the providers' names pinned to loopback."""
    hosts = {"search.allowed.test": "127.0.0.1", "search.other.test": "127.0.0.1"}
    return EgressPolicy(mode=mode, allow=list(allow), hosts=hosts, source="egress", **more)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the providers, one call each


async def test_an_allowlist_lets_a_listed_provider_be_asked_and_refuses_an_unlisted_one(
    searxng: FakeSearxng, tavily: FakeTavily
) -> None:
    listed = WebSearchSettings(provider="searxng", base_url=f"http://search.allowed.test:{searxng.port}")
    hits = await find(listed, "luna moths", policy("allowlist", "allowed.test"))
    assert [h.url for h in hits] == ["https://moths.example/luna"]
    assert len(searxng.calls) == 1

    unlisted = WebSearchSettings(
        provider="tavily", api_key="tvly-test", base_url=f"http://search.other.test:{tavily.port}"
    )
    with pytest.raises(EgressRefused, match=r"search\.other\.test is not on the egress allowlist"):
        await find(unlisted, "my secret diary", policy("allowlist", "allowed.test"))
    images = ImageSearchSettings(provider="tavily", api_key="tvly-test", base_url=unlisted.base_url)
    with pytest.raises(EgressRefused, match="not on the egress allowlist"):
        await find_images(images, "my secret diary", policy("allowlist", "allowed.test"))
    assert tavily.calls == [], "the query never left"


async def test_a_provider_redirecting_off_the_allowlist_is_refused_on_the_way(searxng: FakeSearxng) -> None:
    async with FakeWebsite() as front:
        front.redirect("/search", f"http://search.other.test:{searxng.port}/search")
        settings = WebSearchSettings(provider="searxng", base_url=f"http://search.allowed.test:{front.port}")
        with pytest.raises(EgressRefused, match=r"search\.other\.test is not on the egress allowlist"):
            await find(settings, "luna moths", policy("allowlist", "allowed.test"))
        assert len(front.calls) == 1
    assert searxng.calls == []


async def test_without_an_egress_section_the_search_tools_ask_their_provider_as_before(
    searxng: FakeSearxng,
) -> None:
    settings = WebSearchSettings(provider="searxng", base_url=searxng.base_url)
    unset = policy("none", binds_web=False)  # what access.egress gives without `egress`
    assert [h.title for h in await find(settings, "luna moths", unset)] == ["Moths"]
    assert [h.title for h in await find(settings, "luna moths", policy("all"))] == ["Moths"]


async def test_ddgs_keeps_to_the_engines_the_allowlist_names(ddg: FakeDuckDuckGo) -> None:
    through = {"proxy": ddg.proxy_url, "ca_file": str(ddg.ca_file)}
    settings = WebSearchSettings(backend="duckduckgo,bing,mojeek", **through)
    hits = await find(settings, "luna moths", policy("allowlist", "duckduckgo.com"))
    assert [h.title for h in hits] == ["Moths"]
    assert ddg.connects == ["CONNECT html.duckduckgo.com:443"], "bing and mojeek were not asked"

    ddg.connects.clear()
    with pytest.raises(EgressRefused, match="no search engine's host is allowed"):
        await find(settings, "my secret diary", policy("allowlist", "example.org"))
    with pytest.raises(EgressRefused, match="allows no network access"):
        await find_images(ImageSearchSettings(**through), "my secret diary", policy("none"))
    assert ddg.connects == []


async def test_ddgs_through_a_proxy_that_cannot_be_held_to_the_allowlist_is_refused(
    ddg: FakeDuckDuckGo,
) -> None:
    settings = WebSearchSettings(proxy="socks5://127.0.0.1:9", ca_file=str(ddg.ca_file))
    with pytest.raises(EgressRefused, match="cannot be held to the egress policy"):
        await find(settings, "my secret diary", policy("allowlist", "duckduckgo.com"))
    assert ddg.connects == []


# ------------------------------------------------------------------ in a run, per role


@pytest.fixture
def guest_deployment(config_data: dict[str, Any], searxng: FakeSearxng, tavily: FakeTavily) -> None:
    config_data["title"] = {"enabled": False}
    config_data["tools"] = [
        {"name": "web_search", "use": SEARCH, "provider": "searxng", "base_url": searxng.base_url},
        {
            "name": "image_search",
            "use": IMAGES,
            "provider": "tavily",
            "api_key": "tvly-test",
            "base_url": tavily.base_url,
        },
    ]
    config_data["access"] = {
        "roles": {"member": {}, "guest": {"egress": {"mode": "none"}}},
        "channel_roles": {"telegram": "guest"},  # unlinked chat users get the guest role
    }


def tool_results(events: list[Any]) -> list[str]:
    return [e.data[0]["content"] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]


@pytest.mark.usefixtures("guest_deployment")
async def test_a_role_with_no_egress_gets_its_searches_refused_and_no_provider_hears_the_query(
    bus: Bus,
    fake_model: FakeOpenAI,
    searxng: FakeSearxng,
    tavily: FakeTavily,
    start_runner: StartRunner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    fake_model.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "hunter2 is the password"})]),
        Reply(tool_calls=[ToolCall("image_search", {"query": "hunter2 is the password"})]),
        Reply(text="Searching is not allowed here."),
    )
    async with start_runner():
        request = ask("t-guest-search", "Look this up", user_id="telegram:42")
        searched, pictured = tool_results(await submit_and_collect(bus, request, timeout=60))
    for result in (searched, pictured):
        assert result.startswith("Error: will not ask"), result
        assert "the egress policy (access.roles.guest.egress) allows no network access" in result
    assert searxng.calls == []
    assert tavily.calls == []
    logged = [r.getMessage() for r in caplog.records]
    for tool in ("web_search", "image_search"):
        assert any(
            m.startswith(f"{tool} egress refused") and f"(run {request.run_id})" in m for m in logged
        ), logged


@pytest.mark.usefixtures("guest_deployment")
async def test_a_member_of_the_same_deployment_searches_as_before(
    bus: Bus, fake_model: FakeOpenAI, searxng: FakeSearxng, start_runner: StartRunner
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "luna moths"})]),
        Reply(text="They live a week."),
    )
    async with start_runner():
        (searched,) = tool_results(
            await submit_and_collect(bus, ask("t-member-search", "Moths?"), timeout=60)
        )
    assert "https://moths.example/luna" in searched
    (asked,) = await searxng.wait_for("search")
    assert asked["q"] == "luna moths"
