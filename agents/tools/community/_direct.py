"""Fetching a page ourselves: public addresses only (unless allowed), redirects checked hop by hop,
at most `max_bytes` read, and nothing downloaded for a type that cannot be shown as text.

The address check and the connection use one resolution (`_pinned`): a name that answers a public
address first and 127.0.0.1 next (DNS rebinding) cannot lead the connection to the second.
"""

from __future__ import annotations

import asyncio
import codecs
from dataclasses import dataclass
from typing import Any

import httpx

from access.addresses import AddressRefused, UnresolvableHost, resolve_public
from access.egress import domain_allowed, refusal
from agents.tools.community._html import Kind, kind_of, media_type, sniff
from agents.tools.community._http import client, ssl_context
from agents.tools.community._pinned import CheckedTransport
from agents.tools.community.errors import FetchRefused, ProviderRefused, ProviderTimeout, ProviderUnreachable
from bus.messages import EgressPolicy

MAX_REDIRECTS = 5
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8"


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    mime: str
    kind: Kind
    charset: str | None
    body: bytes  # empty for kind "binary"
    size: int | None  # the whole body's size, when known
    truncated: bool  # only the first max_bytes were read
    redirected: bool


def web_url(url: str) -> httpx.URL:
    """`url` parsed, if it is an absolute http(s) URL.

    Raises:
        FetchRefused: it is not.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise FetchRefused(url, "it is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise FetchRefused(url, "only absolute http:// and https:// URLs can be fetched")
    return parsed


def check_domain(url: str, host: str, allowed: list[str] | None, policy: EgressPolicy | None = None) -> None:
    """Nothing when `host` is on the tool's `allowed` domains (None: any) and the run's egress
    `policy` (`access.egress`; None or one not binding web_fetch: any) allows it.

    Raises:
        FetchRefused: the host is not on the allow-list, or the egress policy refuses it.
    """
    if allowed is not None and not domain_allowed(host, allowed):
        raise FetchRefused(url, f"{host} is not on this deployment's list of allowed domains")
    if policy is not None and policy.binds_web:
        reason = refusal(policy, host)
        if reason is not None:
            raise FetchRefused(url, reason)


async def fetch(
    url: str,
    *,
    timeout_seconds: float,
    max_bytes: int,
    allow_private_networks: bool,
    allowed_domains: list[str] | None = None,
    egress: EgressPolicy | None = None,
) -> Page:
    """The page at `url`, following redirects.

    Raises:
        FetchRefused: not http(s), a private or local address (unless allowed), a host (or a
            redirect's) not in `allowed_domains`, or too many redirects.
        ProviderRefused: the site answered with an HTTP error status.
        ProviderTimeout, ProviderUnreachable: no answer.
    """
    target = web_url(url)
    host = target.host
    check_domain(url, host, allowed_domains, egress)
    pinned = egress.hosts if egress is not None and egress.binds_web else {}

    async def public_addresses(name: str, port: int) -> list[str]:
        return await _public_addresses(str(target), name, port, pinned, allow_private_networks)

    options: dict[str, Any] = {}
    if not allow_private_networks or pinned:  # every connection goes to an address checked on the way
        options["transport"] = CheckedTransport(await ssl_context(), public_addresses)
    try:
        async with asyncio.timeout(timeout_seconds):
            async with await client(timeout_seconds, **options) as http:
                for hop in range(MAX_REDIRECTS + 1):
                    host = target.host
                    async with http.stream("GET", target, headers={"Accept": _ACCEPT}) as response:
                        if response.is_redirect:
                            target = web_url(str(response.url.join(response.headers["location"])))
                            check_domain(str(target), target.host, allowed_domains, egress)
                            continue
                        if response.status_code >= 400:
                            raise ProviderRefused(
                                host, response.status_code, "", _page_hint(response.status_code)
                            )
                        return await _read(response, max_bytes, redirected=hop > 0)
    except (TimeoutError, httpx.TimeoutException):
        raise ProviderTimeout(host, timeout_seconds) from None
    except httpx.HTTPError as exc:
        raise ProviderUnreachable(host, host, str(exc) or type(exc).__name__) from None
    raise FetchRefused(url, f"it redirects more than {MAX_REDIRECTS} times")


async def _read(response: httpx.Response, max_bytes: int, *, redirected: bool) -> Page:
    mime = media_type(response.headers.get("content-type"))
    length = response.headers.get("content-length")
    size = int(length) if length and length.isdigit() else None
    kind = kind_of(mime)
    if kind == "binary":  # described, never shown: no need to download it
        return Page(str(response.url), mime, kind, None, b"", size, False, redirected)
    body = bytearray()
    truncated = False
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            del body[max_bytes:]
            truncated = True
            break
    if kind is None:
        kind = sniff(bytes(body))
    if size is None and not truncated:
        size = len(body)
    kept = bytes(body) if kind != "binary" else b""
    return Page(str(response.url), mime, kind, _charset(response), kept, size, truncated, redirected)


def _charset(response: httpx.Response) -> str | None:
    """The declared charset if Python knows it (a page may name one that does not exist)."""
    name = response.charset_encoding
    try:
        return codecs.lookup(name).name if name else None
    except LookupError:
        return None


async def _public_addresses(
    url: str, host: str, port: int, pinned: dict[str, str], allow_private: bool = False
) -> list[str]:
    """`host`'s addresses, resolved once, if every one is public (a connection then uses them); a
    name the operator pinned (`egress.hosts`) goes to its address.

    Raises:
        FetchRefused: one is loopback, private, link-local, a cloud metadata address or an IPv6
            form carrying one (`access.addresses`); a name answering with a mix is refused whole.
        ProviderUnreachable: the name does not resolve.
    """
    name = host.strip("[]").rstrip(".").lower()
    if name in pinned:
        return [pinned[name]]
    try:
        return await resolve_public(host, port, allow_private=allow_private)
    except UnresolvableHost as exc:
        raise ProviderUnreachable(host, host, f"cannot resolve the name: {exc.detail}") from None
    except AddressRefused as exc:
        raise FetchRefused(
            url,
            f"{host} is a private or local address ({exc.address}: {exc.reason}); "
            "only public web pages can be fetched",
        ) from None


def _page_hint(status: int) -> str:
    if status in (401, 403):
        return "the page needs a login or refuses automated access: try another source"
    if status in (404, 410):
        return "there is no such page: check the URL"
    if status == 429:
        return "rate limited: wait before trying again"
    if status >= 500:
        return "the site has a problem: try again later or another source"
    return ""
