"""Tavily's search API (POST /search), for web and image results."""

from __future__ import annotations

from typing import Any

import httpx

from agents.tools.community._common import ToolSettings
from agents.tools.community._egress import check_host
from agents.tools.community._http import read_json, send
from agents.tools.community.errors import BadProviderResponse, NotConfigured
from bus.messages import EgressPolicy

NAME = "Tavily"
DEFAULT_URL = "https://api.tavily.com"
KEY_ENV = "TAVILY_API_KEY"


async def search(
    settings: ToolSettings,
    query: str,
    max_results: int,
    *,
    images: bool = False,
    egress: EgressPolicy | None = None,
) -> dict[str, Any]:
    """Tavily's answer: `results` (title, url, content) and, with `images`, `images` (url, description).

    Raises:
        NotConfigured: no API key in the entry or in $TAVILY_API_KEY.
        WebToolError: the request failed or the answer has no `results` list.
    """
    url = f"{(settings.base_url or DEFAULT_URL).rstrip('/')}/search"
    check_host(NAME, httpx.URL(url).host, egress)  # the policy first: a refusal needs no key
    key = settings.key(KEY_ENV)
    if not key:
        raise NotConfigured(NAME, f"no API key (set api_key in the tool's config.yaml entry or ${KEY_ENV})")
    body: dict[str, Any] = {"api_key": key, "query": query, "max_results": max_results}
    if images:
        body |= {"include_images": True, "include_image_descriptions": True}
    response = await send(
        NAME,
        "POST",
        url,
        timeout_seconds=settings.timeout_seconds,
        headers={"Authorization": f"Bearer {key}"},
        json_body=body,
        egress=egress,
    )
    data = read_json(NAME, response)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise BadProviderResponse(NAME, "no `results` list")
    return data
