"""HTTP to the providers: one request under a total deadline, errors turned into `WebToolError`s."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import httpx

from access.egress import web_binding as binding
from agents.tools.community._egress import check_host, checked_resolver
from agents.tools.community._pinned import CheckedTransport
from agents.tools.community.errors import (
    BadProviderResponse,
    ProviderRefused,
    ProviderTimeout,
    ProviderUnreachable,
)
from bus.messages import EgressPolicy

USER_AGENT = "Mozilla/5.0 (compatible; Antler/1.0)"
_DETAIL_CHARS = 300

_ssl_context: ssl.SSLContext | None = None


async def ssl_context() -> ssl.SSLContext:
    """The certificate store, loaded once, off the event loop."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = await asyncio.to_thread(httpx.create_ssl_context)
    return _ssl_context


async def client(timeout_seconds: float, **options: Any) -> httpx.AsyncClient:
    """A client for one tool call (`options` for httpx.AsyncClient, e.g. a `transport`)."""
    return httpx.AsyncClient(
        timeout=timeout_seconds, verify=await ssl_context(), headers={"User-Agent": USER_AGENT}, **options
    )


async def send(
    provider: str,
    method: str,
    url: str,
    *,
    timeout_seconds: float,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    egress: EgressPolicy | None = None,
) -> httpx.Response:
    """One request, answered in full within `timeout_seconds` (connect, send and read together);
    with a binding `egress` policy every connection (redirects too) goes only to a host it allows.

    Raises:
        EgressRefused: the policy refuses the URL's host or a redirect's.
        ProviderTimeout: no full answer in time.
        ProviderUnreachable: no connection.
        ProviderRefused: an HTTP status of 400 or more.
    """
    options: dict[str, Any] = {}
    bound = binding(egress)
    if bound is not None:
        check_host(provider, httpx.URL(url).host, bound)
        options["transport"] = CheckedTransport(await ssl_context(), checked_resolver(provider, bound))
    try:
        async with asyncio.timeout(timeout_seconds):
            async with await client(timeout_seconds, follow_redirects=True, **options) as http:
                response = await http.request(method, url, headers=headers, params=params, json=json_body)
    except (TimeoutError, httpx.TimeoutException):
        raise ProviderTimeout(provider, timeout_seconds) from None
    except httpx.HTTPError as exc:
        raise ProviderUnreachable(provider, httpx.URL(url).host, str(exc) or type(exc).__name__) from None
    if response.status_code >= 400:
        raise ProviderRefused(provider, response.status_code, error_detail(response), status_hint(response))
    return response


def read_json(provider: str, response: httpx.Response) -> Any:
    """The body as JSON.

    Raises:
        BadProviderResponse: it is not JSON.
    """
    try:
        return response.json()
    except (ValueError, UnicodeDecodeError):
        content_type = response.headers.get("content-type", "no content type")
        raise BadProviderResponse(provider, f"expected JSON, got {content_type}") from None


def error_detail(response: httpx.Response) -> str:
    """The provider's own words about an error: a JSON `error`, `message` or `detail`, or the text."""
    if "html" in response.headers.get("content-type", ""):
        return ""  # a proxy's or server's error page: the status says as much as its markup
    try:
        body: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        body = response.text
    for _ in range(3):  # Tavily nests it: {"detail": {"error": "..."}}
        if isinstance(body, dict):
            body = next(
                (body[k] for k in ("error", "message", "detail", "readableMessage") if body.get(k)), ""
            )
    if not isinstance(body, str):
        body = json.dumps(body, ensure_ascii=False)
    text = " ".join(body.split())
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + "…"


def status_hint(response: httpx.Response) -> str:
    """What the model (or the user it answers) can do about an HTTP error status."""
    status = response.status_code
    if status in (401, 403):
        return "the service rejected the credentials: check the tool's api_key"
    if status == 429:
        return "rate limited: wait before trying again"
    if status >= 500:
        return "the service has a problem: try again later or another source"
    return ""
