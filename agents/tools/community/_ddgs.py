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

Under a binding egress policy (`access.egress`): `none` asks nothing; `allowlist` keeps only the
engines whose host is listed (each ddgs engine asks the fixed host of its `search_url`:
`html.duckduckgo.com`, `duckduckgo.com` for images, `www.bing.com`, ...), refusing when none is,
and sends every connection through the shared filtering proxy (`access.egress_proxy`) holding that
policy, so a redirect cannot leave the list either; the entry's own `proxy`, when http://, is where
that proxy's allowed tunnels go on (a socks5 or https one cannot be held to the policy: refused).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Literal
from urllib.parse import urlsplit

from access.egress import refusal
from access.egress import web_binding as binding
from access.egress_proxy import EgressProxy
from agents.tools.community._common import ToolSettings
from agents.tools.community._egress import check_host
from agents.tools.community.errors import (
    EgressRefused,
    ProviderRefused,
    ProviderTimeout,
    ProviderUnreachable,
)
from bus.messages import EgressPolicy

NAME = "DuckDuckGo"


class DdgsSettings(ToolSettings):
    """The keys the keyless provider reads (besides `provider`, `max_results`, `timeout_seconds`)."""

    backend: str = "duckduckgo"
    region: str = "us-en"
    safesearch: Literal["on", "moderate", "off"] = "moderate"
    proxy: str | None = None
    ca_file: str | None = None


def engine_hosts(kind: str, backend: str) -> dict[str, str]:
    """The host each engine `backend` names asks (`auto`/`all`: every engine of the kind)."""
    from ddgs.engines import ENGINES

    engines = ENGINES.get("images" if kind == "images" else "text", {})
    names = [name.strip() for name in backend.split(",") if name.strip()]
    if not names or "auto" in names or "all" in names or not any(n in engines for n in names):
        names = list(engines)  # what ddgs falls back to as well
    hosts: dict[str, str] = {}
    for name in names:
        engine = engines.get(name)
        host = urlsplit(engine.search_url).hostname if engine is not None else None
        if host:
            hosts[name] = host
    return hosts


def allowed_backend(settings: DdgsSettings, kind: str, policy: EgressPolicy | None) -> str:
    """`settings.backend` narrowed to the engines the run's `policy` lets it reach.

    Raises:
        EgressRefused: the policy allows no network, or none of the engines' hosts.
    """
    bound = binding(policy)
    if bound is None:
        return settings.backend
    hosts = engine_hosts(kind, settings.backend)
    if bound.mode == "none":
        check_host(NAME, next(iter(hosts.values()), "duckduckgo.com"), bound)
    allowed = [name for name, host in hosts.items() if refusal(bound, host) is None]
    if not allowed:
        listed = ", ".join(sorted(set(hosts.values())))
        reason = refusal(bound, next(iter(hosts.values()), "duckduckgo.com")) or ""
        raise EgressRefused(NAME, listed, f"no search engine's host is allowed; {reason}")
    return ",".join(allowed)


def _search(
    settings: DdgsSettings, kind: str, query: str, max_results: int, proxy: str | None
) -> list[dict[str, Any]]:
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

    client = DDGS(
        proxy=proxy,
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
    settings: DdgsSettings,
    query: str,
    max_results: int,
    kind: str = "text",
    *,
    egress: EgressPolicy | None = None,
    where: str = "web_search",
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """Results as ddgs gives them: text `{title, href, body}`, images `{title, image, thumbnail, url, ...}`;
    `egress` is the run's policy, `where` and `run_id` name the tool and run in the log of refusals.

    Raises:
        EgressRefused: the run's egress policy refuses every engine, or a connection on the way.
        ProviderTimeout, ProviderRefused (rate limited), ProviderUnreachable
    """
    backend = allowed_backend(settings, kind, egress)
    current = settings.model_copy(update={"backend": backend})
    bound = binding(egress)
    if bound is None:
        return await asyncio.to_thread(_search, current, kind, query, max_results, settings.proxy)
    try:  # the entry's own proxy (a corporate one) carries the tunnels the policy allowed
        guard = EgressProxy(bound, where=where, run_id=run_id, upstream=settings.proxy)
    except ValueError:
        reason = f"its proxy ({urlsplit(settings.proxy or '').scheme}://) cannot be held to the egress policy"
        raise EgressRefused(NAME, ", ".join(engine_hosts(kind, backend).values()), reason) from None
    port = await guard.start()
    try:
        return await asyncio.to_thread(_search, current, kind, query, max_results, f"http://127.0.0.1:{port}")
    except ProviderUnreachable:
        if guard.refusals:
            refused = guard.refusals[-1]
            raise EgressRefused(NAME, refused.host, refused.reason) from None
        raise
    finally:
        await guard.stop()
