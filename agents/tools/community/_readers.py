"""Hosted page readers that return a page as Markdown: Jina Reader and Firecrawl."""

from __future__ import annotations

from agents.tools.community._common import ToolSettings, first
from agents.tools.community._http import read_json, send
from agents.tools.community.errors import BadProviderResponse, NotConfigured, WebToolError
from bus.messages import EgressPolicy

JINA = "Jina Reader"
JINA_URL = "https://r.jina.ai"
JINA_KEY_ENV = "JINA_API_KEY"

FIRECRAWL = "Firecrawl"
FIRECRAWL_URL = "https://api.firecrawl.dev"
FIRECRAWL_KEY_ENV = "FIRECRAWL_API_KEY"


async def jina(settings: ToolSettings, url: str, egress: EgressPolicy | None = None) -> str:
    """The page as Jina renders it (`GET <reader>/<url>`: Title, URL Source, Markdown Content).

    The key is optional: without one Jina serves fewer requests per minute. The reader is told the
    URL, so the run's `egress` policy must allow the reader's host as well as the page's.
    """
    headers = {"Accept": "text/plain", "X-Return-Format": "markdown"}
    key = settings.key(JINA_KEY_ENV)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    response = await send(
        JINA,
        "GET",
        f"{(settings.base_url or JINA_URL).rstrip('/')}/{url}",
        timeout_seconds=settings.timeout_seconds,
        headers=headers,
        egress=egress,
    )
    return response.text.strip()


async def firecrawl(settings: ToolSettings, url: str, egress: EgressPolicy | None = None) -> str:
    """The page's main content as Markdown, under its title (`POST /v1/scrape`); the run's `egress`
    policy must allow Firecrawl's host as well as the page's.

    Raises:
        NotConfigured: Firecrawl's own service without an API key (a self-hosted one may need none).
    """
    key = settings.key(FIRECRAWL_KEY_ENV)
    if not key and not settings.base_url:
        raise NotConfigured(
            FIRECRAWL, f"no API key (set api_key in the tool's config.yaml entry or ${FIRECRAWL_KEY_ENV})"
        )
    response = await send(
        FIRECRAWL,
        "POST",
        f"{(settings.base_url or FIRECRAWL_URL).rstrip('/')}/v1/scrape",
        timeout_seconds=settings.timeout_seconds,
        headers={"Authorization": f"Bearer {key}"} if key else None,
        json_body={"url": url, "formats": ["markdown"], "onlyMainContent": True},
        egress=egress,
    )
    answer = read_json(FIRECRAWL, response)
    if not isinstance(answer, dict):
        raise BadProviderResponse(FIRECRAWL, "not a JSON object")
    if answer.get("success") is not True:
        reason = first(answer, "error", "message") or "no reason given"
        raise WebToolError(FIRECRAWL, f"{FIRECRAWL} could not read {url}: {reason}")
    data = answer.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("markdown"), str):
        raise BadProviderResponse(FIRECRAWL, "no `data.markdown`")
    metadata = data.get("metadata")
    title = first(metadata, "title") if isinstance(metadata, dict) else ""
    markdown = data["markdown"].strip()
    return f"# {title}\n\n{markdown}" if title else markdown
