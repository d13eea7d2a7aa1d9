"""web_search and image_search, built from config entries, against local fakes of their providers;
and web_search in a real run of the lead agent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.tools import BaseTool

from agents.errors import ToolConfigError
from agents.tools import config_tools
from bus import Bus
from config import AppConfig, load_config
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.fakes.web_providers import FakeSearxng, FakeTavily, Hit, Image
from tests.support.fakes import fake_fixture
from tests.support.runner import StartRunner, ask, submit_and_collect

SEARCH = "agents.tools.community.web_search:make_web_search"
IMAGES = "agents.tools.community.image_search:make_image_search"


@pytest.fixture(autouse=True)
def no_provider_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("TAVILY_API_KEY", "JINA_API_KEY", "FIRECRAWL_API_KEY"):
        monkeypatch.delenv(variable, raising=False)


@pytest_asyncio.fixture
async def tavily() -> AsyncIterator[FakeTavily]:
    async with FakeTavily(api_key="tvly-test") as fake:
        yield fake


searxng = fake_fixture(FakeSearxng, "The fake SearXNG instance.")


def build(entry: dict[str, Any]) -> BaseTool:
    """The tool `config_tools` makes of one config.yaml `tools[]` entry."""
    (tool,) = config_tools(AppConfig.model_validate({"tools": [entry]}))
    return tool


def tavily_entry(fake: FakeTavily, **extra: Any) -> dict[str, Any]:
    return {
        "name": "web_search",
        "use": SEARCH,
        "provider": "tavily",
        "api_key": "tvly-test",
        "base_url": fake.base_url,
        **extra,
    }


def searxng_entry(fake: FakeSearxng, **extra: Any) -> dict[str, Any]:
    return {"name": "web_search", "use": SEARCH, "provider": "searxng", "base_url": fake.base_url, **extra}


def numbered(output: str) -> list[str]:
    """The titles of the numbered results in a tool's answer."""
    return [line.split(". ", 1)[1] for line in output.splitlines() if line[:1].isdigit()]


def hits(count: int, words: int = 10) -> list[Hit]:
    return [
        Hit(f"Result {i}", f"https://example.com/{i}", f"About topic {i}: " + " ".join(["detail"] * words))
        for i in range(count)
    ]


# ------------------------------------------------------------------ web_search


async def test_tavily_results_come_back_as_titles_urls_and_short_snippets(tavily: FakeTavily) -> None:
    tavily.results = hits(8, words=300)
    tool = build(tavily_entry(tavily, max_results=3, max_snippet_chars=120))

    output = await tool.ainvoke({"query": "antler nats"})

    assert output.startswith('Search results for "antler nats":')
    assert numbered(output) == ["Result 0", "Result 1", "Result 2"]
    assert "   URL: https://example.com/2" in output.splitlines()
    snippets = [line.strip() for line in output.splitlines() if line.strip().startswith("About topic")]
    assert len(snippets) == 3
    assert all(len(s) <= 120 and s.endswith("…") for s in snippets)
    (request,) = await tavily.wait_for("search")
    assert (request["query"], request["max_results"], request["api_key"]) == ("antler nats", 3, "tvly-test")


async def test_searxng_needs_no_key_and_the_tool_keeps_only_max_results(searxng: FakeSearxng) -> None:
    searxng.results = hits(12)
    tool = build(searxng_entry(searxng))

    output = await tool.ainvoke({"query": "open source search"})

    assert numbered(output) == [f"Result {i}" for i in range(5)], "max_results defaults to 5"
    assert "https://example.com/4" in output
    assert "https://example.com/5" not in output
    (request,) = await searxng.wait_for("search")
    assert request == {"q": "open source search", "format": "json", "categories": "general", "pageno": "1"}


async def test_a_config_written_before_the_tools_moved_still_builds_them(searxng: FakeSearxng) -> None:
    """`use: agents.community.web_search:make_web_search` (the path before `agents/tools/`) still works."""
    searxng.results = hits(2)
    tool = build({**searxng_entry(searxng), "use": "agents.community.web_search:make_web_search"})

    output = await tool.ainvoke({"query": "open source search"})

    assert numbered(output) == ["Result 0", "Result 1"]


async def test_the_tool_takes_its_name_from_the_entry(tavily: FakeTavily) -> None:
    tool = build(tavily_entry(tavily, name="search_the_internet", max_results=7))
    assert tool.name == "search_the_internet"
    assert "up to 7 results" in tool.description
    assert set(tool.args) == {"query"}


async def test_no_results_are_reported_as_such(searxng: FakeSearxng) -> None:
    output = await build(searxng_entry(searxng)).ainvoke({"query": "zxqv nothing"})
    assert output == 'No results for "zxqv nothing". Try other words.'


FAKES: dict[str, Callable[[], FakeTavily | FakeSearxng]] = {"tavily": FakeTavily, "searxng": FakeSearxng}
TROUBLE = [
    pytest.param({"fail_with": 500}, "answered HTTP 500", id="http-500"),
    pytest.param({"fail_with": 429}, "rate limited", id="http-429"),
    pytest.param({"hang": True}, "did not answer within 0.5s", id="timeout"),
    pytest.param({"not_json": True}, "sent an answer that cannot be read", id="not-json"),
]


@pytest.mark.parametrize("provider", ["tavily", "searxng"])
@pytest.mark.parametrize(("trouble", "expected"), TROUBLE)
async def test_a_failing_provider_gives_the_model_an_error_line_not_an_exception(
    provider: str, trouble: dict[str, Any], expected: str
) -> None:
    async with FAKES[provider]() as fake:
        for attribute, value in trouble.items():
            setattr(fake, attribute, value)
        entry = tavily_entry(fake) if isinstance(fake, FakeTavily) else searxng_entry(fake)
        output = await build({**entry, "timeout_seconds": 0.5}).ainvoke({"query": "anything"})
    assert output.startswith("Error: ")
    assert expected in output
    assert {"tavily": "Tavily", "searxng": "SearXNG"}[provider] in output


async def test_a_rejected_api_key_points_at_the_api_key_setting(tavily: FakeTavily) -> None:
    output = await build(tavily_entry(tavily, api_key="tvly-wrong")).ainvoke({"query": "q"})
    assert output.startswith("Error: Tavily answered HTTP 401: Unauthorized: missing or invalid API key.")
    assert "check the tool's api_key" in output


async def test_without_any_key_the_error_says_where_to_put_one(tavily: FakeTavily) -> None:
    entry = tavily_entry(tavily)
    del entry["api_key"]
    output = await build(entry).ainvoke({"query": "q"})
    assert output.startswith("Error: ")
    assert "set api_key in the tool's config.yaml entry or $TAVILY_API_KEY" in output
    assert tavily.calls == [], "nothing is sent without a key"


async def test_a_key_from_the_environment_may_be_exported_after_the_config_loads(
    tavily: FakeTavily, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTLER_TEST_TAVILY_KEY", raising=False)
    path = tmp_path / "config.yaml"
    path.write_text(
        "tools:\n"
        "  - name: web_search\n"
        f"    use: {SEARCH}\n"
        "    provider: tavily\n"
        "    api_key: $ANTLER_TEST_TAVILY_KEY\n"
        f"    base_url: {tavily.base_url}\n",
        encoding="utf-8",
    )
    (tool,) = config_tools(load_config(path))  # an unset variable does not stop the tool being built

    missing = await tool.ainvoke({"query": "q"})
    assert missing.startswith("Error: web_search is not set up")
    assert "ANTLER_TEST_TAVILY_KEY" in missing
    assert tavily.calls == []

    tavily.results = hits(1)
    monkeypatch.setenv("ANTLER_TEST_TAVILY_KEY", "tvly-test")
    assert numbered(await tool.ainvoke({"query": "q"})) == ["Result 0"]


async def test_searxng_without_json_output_says_how_to_turn_it_on(searxng: FakeSearxng) -> None:
    searxng.json_enabled = False
    output = await build(searxng_entry(searxng)).ainvoke({"query": "q"})
    assert output.startswith("Error: SearXNG answered HTTP 403")
    assert "search.formats" in output


async def test_an_unreachable_provider_is_an_error_line(tavily: FakeTavily) -> None:
    entry = tavily_entry(tavily, base_url="http://127.0.0.1:9")  # the discard port: nothing listens
    output = await build(entry).ainvoke({"query": "q"})
    assert output.startswith("Error: cannot reach Tavily at 127.0.0.1")


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        pytest.param({"provider": "bing"}, "provider", id="unknown-provider"),
        pytest.param({"provider": "tavily", "max_result": 3}, "max_result", id="misspelt-key"),
        pytest.param({"provider": "searxng"}, "base_url", id="searxng-without-address"),
        pytest.param({"provider": "tavily", "max_results": 0}, "max_results", id="no-results-asked"),
    ],
)
def test_a_wrong_entry_stops_config_tools_and_names_the_tool(extra: dict[str, Any], problem: str) -> None:
    with pytest.raises(ToolConfigError, match=r"tools\[0\] \(web_search\)") as raised:
        build({"name": "web_search", "use": SEARCH, **extra})
    assert problem in str(raised.value)


# ------------------------------------------------------------------ image_search


async def test_searxng_images_come_with_image_thumbnail_and_page(searxng: FakeSearxng) -> None:
    searxng.images = [
        Image("Not an image result", "", "", "https://example.com/text"),
        *(
            Image(
                f"Red fox {i}",
                f"https://img.example.com/fox{i}.jpg",
                f"//thumbs.example.com/fox{i}.jpg",
                f"https://example.com/foxes/{i}",
            )
            for i in range(6)
        ),
    ]
    entry = {"name": "image_search", "use": IMAGES, "provider": "searxng", "base_url": searxng.base_url}
    tool = build({**entry, "max_results": 3})

    output = await tool.ainvoke({"query": "red fox"})

    assert numbered(output) == ["Red fox 0", "Red fox 1", "Red fox 2"]
    lines = [line.strip() for line in output.splitlines()]
    assert "Image: https://img.example.com/fox0.jpg" in lines
    assert "Thumbnail: https://thumbs.example.com/fox0.jpg" in lines
    assert "Page: https://example.com/foxes/0" in lines
    (request,) = await searxng.wait_for("search")
    assert (request["q"], request["categories"]) == ("red fox", "images")


async def test_tavily_images_come_with_their_descriptions(tavily: FakeTavily) -> None:
    tavily.images = [(f"https://img.example.com/{i}.png", f"A diagram number {i}") for i in range(4)]
    entry = {
        "name": "pictures",
        "use": IMAGES,
        "provider": "tavily",
        "api_key": "tvly-test",
        "base_url": tavily.base_url,
        "max_results": 2,
    }

    output = await build(entry).ainvoke({"query": "nats diagram"})

    assert numbered(output) == ["A diagram number 0", "A diagram number 1"]
    assert "   Image: https://img.example.com/1.png" in output.splitlines()
    (request,) = await tavily.wait_for("search")
    assert request["include_images"] is True


async def test_a_failing_image_provider_gives_an_error_line(searxng: FakeSearxng) -> None:
    searxng.fail_with = 502
    entry = {"name": "image_search", "use": IMAGES, "provider": "searxng", "base_url": searxng.base_url}
    output = await build(entry).ainvoke({"query": "fox"})
    assert output.startswith("Error: SearXNG answered HTTP 502")


# ------------------------------------------------------------------ in a run


async def test_the_lead_agent_searches_the_web_and_the_model_reads_the_results(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    tavily: FakeTavily,
    start_runner: StartRunner,
) -> None:
    tavily.results = [Hit("JetStream | NATS Docs", "https://docs.nats.io/jetstream", "Persistence for NATS.")]
    config_data["tools"] = [tavily_entry(tavily)]
    fake_model.script(
        Reply(tool_calls=[ToolCall("web_search", {"query": "what is jetstream"})]),
        Reply(text="JetStream is the persistence layer of NATS."),
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-web", "What is JetStream?"))

    results = [e.data[0] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]
    assert [r["name"] for r in results] == ["web_search"]
    assert "1. JetStream | NATS Docs" in results[0]["content"]
    assert "URL: https://docs.nats.io/jetstream" in results[0]["content"]
    (search,) = await tavily.wait_for("search")
    assert search["query"] == "what is jetstream"
    sent_back = [m for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "tool"]
    assert "https://docs.nats.io/jetstream" in sent_back[0]["content"], "the model reads the results"
    assert [e.event for e in events][-1] == "end"
