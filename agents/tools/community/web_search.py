"""`web_search`: titles, URLs and snippets of web results, from DuckDuckGo (no key), Tavily or SearXNG.

config.yaml:

    tools:
      - name: web_search
        use: agents.tools.community.web_search:make_web_search
        # provider unset = duckduckgo, through the ddgs library: no key, no instance to run
        # (backend, region, safesearch, proxy, ca_file: see agents/tools/community/_ddgs.py)
        provider: tavily            # or searxng (key-less; needs base_url)
        api_key: $TAVILY_API_KEY    # unset = $TAVILY_API_KEY
        max_results: 5

A run asking the same query twice gets the first answer again (agents.tools.community._cache).
The run's egress policy (`access.egress`) decides whether the provider may be asked at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal, Self

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, model_validator

from agents.tools.community import _ddgs, _searxng, _tavily
from agents.tools.community._cache import RunCache
from agents.tools.community._common import (
    call_settings,
    check_settings,
    clip,
    first,
    guarded,
    run_egress,
    run_id,
)
from agents.tools.from_config import tool_factory
from bus.messages import EgressPolicy
from config import ToolConfig

logger = logging.getLogger(__name__)


class WebSearchSettings(_ddgs.DdgsSettings):
    provider: Literal["duckduckgo", "tavily", "searxng"] = "duckduckgo"
    max_results: int = Field(5, ge=1, le=20)
    max_snippet_chars: int = Field(400, ge=40)

    @model_validator(mode="after")
    def _searxng_needs_its_address(self) -> Self:
        if self.provider == "searxng" and not self.base_url:
            raise ValueError("provider searxng needs base_url, the address of a SearXNG instance")
        return self


class WebSearchArgs(BaseModel):
    query: str = Field(description="What to search for, as you would type it into a search engine.")


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


async def find(
    settings: WebSearchSettings, query: str, egress: EgressPolicy | None = None, where: str = "web_search"
) -> list[SearchHit]:
    """The provider's results for `query`, at most `max_results`, snippets clipped; the run's
    `egress` policy (`access.egress`) decides whether the provider may be asked.

    Raises:
        EgressRefused: the policy refuses the provider's host (the query is sent nowhere).
        WebToolError: the provider failed.
    """
    if settings.provider == "duckduckgo":
        found = await _ddgs.search(
            settings, query, settings.max_results, egress=egress, where=where, run_id=run_id()
        )
        raw = [{"title": r.get("title"), "url": r.get("href"), "content": r.get("body")} for r in found]
    elif settings.provider == "tavily":
        data = await _tavily.search(settings, query, settings.max_results, egress=egress)
        raw = data["results"]
    else:
        raw = await _searxng.search(settings, query, "general", egress)
    hits = []
    for item in raw:
        if not isinstance(item, dict) or not first(item, "url"):
            continue
        url = first(item, "url")
        snippet = clip(first(item, "content", "snippet"), settings.max_snippet_chars)
        hits.append(SearchHit(first(item, "title") or url, url, snippet))
        if len(hits) == settings.max_results:
            break
    return hits


def render(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f'No results for "{query}". Try other words.'
    lines = [f'Search results for "{query}":']
    for number, hit in enumerate(hits, 1):
        lines += ["", f"{number}. {hit.title}", f"   URL: {hit.url}"]
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


@tool_factory
def make_web_search(entry: ToolConfig) -> BaseTool:
    """The web search tool named `entry.name`, configured by the entry's extra keys."""
    settings = check_settings(entry, WebSearchSettings)
    cache = RunCache()

    async def search(query: str) -> str:
        query = query.strip()
        if not query:
            return "Error: the query is empty; say what to search for."

        async def work() -> str:
            current = call_settings(entry, WebSearchSettings)
            hits = await find(current, query, run_egress(), entry.name)
            logger.info("%s: %s gave %d result(s)", entry.name, current.provider, len(hits))
            return render(query, hits)

        return await cache.get_or_make(" ".join(query.split()).lower(), lambda: guarded(entry.name, work))

    return StructuredTool.from_function(
        coroutine=search,
        name=entry.name,
        description=(
            f"Search the web. Returns up to {settings.max_results} results, each with its title, URL "
            "and a short snippet. Snippets are brief: fetch a result's URL to read the page itself."
        ),
        args_schema=WebSearchArgs,
    )
