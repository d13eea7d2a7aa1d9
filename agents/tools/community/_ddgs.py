"""DuckDuckGo (and the other engines of the `ddgs` metasearch library): web and image search with no key.

`ddgs` talks to the engines' own web endpoints (DuckDuckGo's HTML search,
its image JSON), with `primp` as its HTTP client; both are synchronous, so each
search runs on a worker thread. `proxy` (http, https or socks5 URL) and
`ca_file` (a PEM bundle: a TLS-inspecting corporate proxy's certificate) are
passed to it, so Antler's egress rules apply to it as to the other web tools.

`backend` picks the engines: `duckduckgo` (the default), or any list ddgs
knows (`bing`, `brave`, `google`, `mojeek`, `wikipedia`, ...; `auto` for all).
Nothing found is an empty list; a time-out, a rate limit or a connection
failure is a WebToolError whose text tells the model what to do.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Literal

from agents.tools.community._common import ToolSettings
from agents.tools.community.errors import ProviderRefused, ProviderTimeout, ProviderUnreachable

NAME = "DuckDuckGo"


class DdgsSettings(ToolSettings):
    """The keys the keyless provider reads (besides `provider`, `max_results`, `timeout_seconds`)."""

    backend: str = "duckduckgo"
    region: str = "us-en"
    safesearch: Literal["on", "moderate", "off"] = "moderate"
    proxy: str | None = None
    ca_file: str | None = None


def _search(settings: DdgsSettings, kind: str, query: str, max_results: int) -> list[dict[str, Any]]:
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

    client = DDGS(
        proxy=settings.proxy,
        timeout=max(1, math.ceil(settings.timeout_seconds)),
        verify=settings.ca_file or True,
    )
    search = client.images if kind == "images" else client.text
    try:
        return search(
            query,
            region=settings.region,
            safesearch=settings.safesearch,
            max_results=max_results,
            backend=settings.backend,
        )
    except TimeoutException:
        raise ProviderTimeout(NAME, settings.timeout_seconds) from None
    except RatelimitException as exc:
        raise ProviderRefused(NAME, 429, str(exc), "rate limited; try again in a minute") from None
    except DDGSException as exc:
        detail = str(exc)
        if "No results found" in detail:
            return []
        raise ProviderUnreachable(NAME, settings.backend, detail) from None


async def search(
    settings: DdgsSettings, query: str, max_results: int, kind: str = "text"
) -> list[dict[str, Any]]:
    """Results as ddgs gives them: text `{title, href, body}`, images `{title, image, thumbnail, url, ...}`.

    Raises:
        ProviderTimeout, ProviderRefused (rate limited), ProviderUnreachable
    """
    return await asyncio.to_thread(_search, settings, kind, query, max_results)
