"""Research with no keys: web_search and image_search default to DuckDuckGo through `ddgs`,
tested against a local fake of DuckDuckGo's endpoints reached through a proxy (never the internet)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.tools import BaseTool

from agents.tools import config_tools
from bus import Bus
from config import AppConfig
from tests.fakes.duckduckgo import FakeDuckDuckGo, Page, Picture
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartRunner, ask, submit_and_collect

pytestmark = pytest.mark.asyncio

SEARCH = "agents.tools.community.web_search:make_web_search"
IMAGES = "agents.tools.community.image_search:make_image_search"


@pytest_asyncio.fixture
async def ddg(tmp_path: Path) -> AsyncIterator[FakeDuckDuckGo]:
    async with FakeDuckDuckGo(tmp_path) as fake:
        yield fake


def keyless(fake: FakeDuckDuckGo, name: str, use: str, **extra: Any) -> dict[str, Any]:
    """A tools[] entry naming no provider: only how to reach the outside (proxy and its CA)."""
    return {"name": name, "use": use, "proxy": fake.proxy_url, "ca_file": str(fake.ca_file), **extra}


def build(entry: dict[str, Any]) -> BaseTool:
    (tool,) = config_tools(AppConfig.model_validate({"tools": [entry]}))
    return tool


async def test_web_search_with_no_provider_asks_duckduckgo_and_needs_no_key(ddg: FakeDuckDuckGo) -> None:
    ddg.pages = [
        Page("NATS JetStream", "https://docs.nats.io/jetstream", "Persistence for NATS: streams, consumers."),
        Page("Antler on GitHub", "https://example.org/antler", "An event-driven super agent."),
    ]
    output = await build(keyless(ddg, "web_search", SEARCH)).ainvoke({"query": "nats jetstream"})

    assert output.startswith('Search results for "nats jetstream":')
    assert "1. NATS JetStream" in output
    assert "   URL: https://docs.nats.io/jetstream" in output
    assert "An event-driven super agent." in output
    assert "CONNECT html.duckduckgo.com:443" in ddg.connects
    (asked,) = await ddg.wait_for("html")
    assert asked["q"] == "nats jetstream"


async def test_image_search_with_no_provider_asks_duckduckgo_images(ddg: FakeDuckDuckGo) -> None:
    ddg.pictures = [
        Picture(
            "A red fox", "https://img.example/fox.jpg", "https://tn.example/fox.jpg", "https://example/fox"
        )
    ]
    output = await build(keyless(ddg, "image_search", IMAGES)).ainvoke({"query": "red fox"})

    assert output.startswith('Image results for "red fox":')
    assert "1. A red fox" in output
    assert "   Image: https://img.example/fox.jpg" in output
    assert "   Thumbnail: https://tn.example/fox.jpg" in output
    assert "   Page: https://example/fox" in output
    (images,) = await ddg.wait_for("images")
    assert images["q"] == "red fox"


async def test_an_unreachable_duckduckgo_is_a_readable_error_line(ddg: FakeDuckDuckGo) -> None:
    entry = keyless(ddg, "web_search", SEARCH, proxy="http://127.0.0.1:9", timeout_seconds=3)
    output = await build(entry).ainvoke({"query": "anything"})
    assert output.startswith("Error: cannot reach DuckDuckGo"), output
    assert "try again later" in output


async def test_an_agent_with_no_search_provider_configured_researches_and_asks_each_query_once_a_run(
    bus: Bus,
    fake_model: FakeOpenAI,
    ddg: FakeDuckDuckGo,
    config_data: dict[str, Any],
    start_runner: StartRunner,
) -> None:
    ddg.pages = [Page("Tide tables", "https://tides.example/oslo", "High tide in Oslo at 06:12.")]
    config_data["tools"] = [keyless(ddg, "web_search", SEARCH)]
    search = ToolCall("web_search", {"query": "Oslo tide"})
    fake_model.script(
        Reply(tool_calls=[search]),
        Reply(tool_calls=[ToolCall("web_search", {"query": "oslo  TIDE"})], when="High tide"),
        Reply(text="High tide in Oslo is at 06:12.", when="High tide"),
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-research", "when is high tide in Oslo?"))
    assert events[-1].data["status"] == "success"
    sent = fake_model.agent_requests[-1]["messages"]
    results = [str(m.get("content")) for m in sent if m.get("role") == "tool"]
    assert len(results) == 2
    assert all("https://tides.example/oslo" in r for r in results)
    assert len([c for c in ddg.calls if c[0] == "html"]) == 1, "the same query in one run is asked once"
