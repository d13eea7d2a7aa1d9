"""A SearXNG instance's JSON search API (GET /search?format=json): key-less, self-hosted.

https://docs.searxng.org/dev/search_api.html. The instance must list `json` in
`search.formats` of its settings.yml; otherwise it answers 403.
"""

from __future__ import annotations

from typing import Any

from agents.tools.community._common import ToolSettings
from agents.tools.community._http import read_json, send
from agents.tools.community.errors import BadProviderResponse, NotConfigured, ProviderRefused
from bus.messages import EgressPolicy

NAME = "SearXNG"


async def search(
    settings: ToolSettings, query: str, categories: str, egress: EgressPolicy | None = None
) -> list[dict[str, Any]]:
    """The instance's `results` for `query` in `categories` (e.g. "general", "images"), best first.

    Raises:
        NotConfigured: no base_url.
        WebToolError: the request failed or the answer has no `results` list.
    """
    if not settings.base_url:
        raise NotConfigured(NAME, "no base_url (the address of a SearXNG instance)")
    try:
        response = await send(
            NAME,
            "GET",
            f"{settings.base_url.rstrip('/')}/search",
            timeout_seconds=settings.timeout_seconds,
            params={"q": query, "format": "json", "categories": categories, "pageno": 1},
            egress=egress,
        )
    except ProviderRefused as exc:
        if exc.status != 403:
            raise
        hint = "the instance does not serve JSON; its settings.yml must list json in search.formats"
        raise ProviderRefused(NAME, 403, exc.detail, hint) from None
    data = read_json(NAME, response)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise BadProviderResponse(NAME, "no `results` list")
    return [r for r in data["results"] if isinstance(r, dict)]
